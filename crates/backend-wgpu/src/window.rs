//! Sliding-window kernels over `[N, C, H, W]`: im2col, col2im and pooling. Each invocation
//! computes one output element; the adjoints (col2im, avg-pool backward) gather per input pixel
//! from every window covering it, so none needs atomics.

use std::sync::Arc;

use liandan_tensor::backend::Window2d;
use liandan_tensor::{DType, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::launch::WIDE;
use crate::params::{words, Meta};
use crate::plan::{self, PoolBackward};
use crate::repr::Repr;

const GEOMETRY: &str = include_str!("shaders/window_geometry.wgsl");
const IM2COL: &str = include_str!("shaders/window_im2col.wgsl");
const COL2IM: &str = include_str!("shaders/window_col2im.wgsl");
const MAX_POOL: &str = include_str!("shaders/pool_max.wgsl");
/// Max pooling's window walk and its gradient's gather, shared by the kernels on words as
/// stored and on packed bf16.
const MAX_WINDOW: &str = include_str!("shaders/pool_max_window.wgsl");
const MAX_GATHER: &str = include_str!("shaders/pool_max_backward_gather.wgsl");
const AVG_POOL: &str = include_str!("shaders/pool_avg.wgsl");
const AVG_POOL_BACKWARD: &str = include_str!("shaders/pool_avg_backward.wgsl");
const MAX_POOL_BACKWARD: &str = include_str!("shaders/pool_max_backward.wgsl");
const MAX_POOL_PACKED: &str = include_str!("shaders/packed/pool_max.wgsl");
const MAX_POOL_BACKWARD_PACKED: &str = include_str!("shaders/packed/pool_max_backward.wgsl");

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Im2col,
    Col2im,
    MaxPool,
    AvgPool,
    AvgPoolBackward,
    /// Reads the indices max pooling returned beside dy (`max_pool2d_backward_op`).
    MaxPoolBackward,
    /// The same where the windows tile the input: each pixel in at most one window.
    MaxPoolBackwardTiles,
}

const KINDS: [Kind; 7] = [Kind::Im2col, Kind::Col2im, Kind::MaxPool, Kind::AvgPool, Kind::AvgPoolBackward, Kind::MaxPoolBackward, Kind::MaxPoolBackwardTiles];

impl Kind {
    fn template(self) -> &'static str {
        match self {
            Kind::Im2col => IM2COL,
            Kind::Col2im => COL2IM,
            Kind::MaxPool => MAX_POOL,
            Kind::AvgPool => AVG_POOL,
            Kind::AvgPoolBackward => AVG_POOL_BACKWARD,
            Kind::MaxPoolBackward | Kind::MaxPoolBackwardTiles => MAX_POOL_BACKWARD,
        }
    }

    /// The shape the kernel's input must have.
    fn input_shape(self, w: &Window2d) -> Vec<usize> {
        match self {
            Kind::Im2col | Kind::MaxPool | Kind::AvgPool => vec![w.n, w.c, w.h, w.w],
            Kind::Col2im => vec![w.n, w.col_rows(), w.col_cols()],
            Kind::AvgPoolBackward | Kind::MaxPoolBackward | Kind::MaxPoolBackwardTiles => vec![w.n, w.c, w.out_h(), w.out_w()],
        }
    }

    /// Elements of the (first) output, one invocation each.
    fn outputs(self, w: &Window2d) -> usize {
        match self {
            Kind::Im2col => w.n * w.col_rows() * w.col_cols(),
            Kind::Col2im | Kind::AvgPoolBackward | Kind::MaxPoolBackward | Kind::MaxPoolBackwardTiles => w.n * w.c * w.h * w.w,
            Kind::MaxPool | Kind::AvgPool => w.n * w.c * w.col_cols(),
        }
    }
}

/// One window kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    kind: Kind,
    dtype: DType,
    /// Max pooling and its gradient on packed bf16 as stored, two outputs an invocation.
    packed: bool,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<WindowParams>().ty("x", self.dtype).part(GEOMETRY);
        let w = if self.packed { crate::packed::with_words(w) } else { w };
        let w = match self.kind {
            // The pad value arrives as f32 bits in `extra[0]`; an f64 one as three f32s.
            Kind::Im2col if self.dtype == DType::F64 => w.part(include_str!("shaders/window/pad_f64.wgsl")),
            Kind::Im2col => w.part(include_str!("shaders/window/pad.wgsl")),
            Kind::MaxPool => w.part(MAX_WINDOW),
            Kind::MaxPoolBackward | Kind::MaxPoolBackwardTiles => w.flag("TILES", self.kind == Kind::MaxPoolBackwardTiles).part(MAX_GATHER),
            _ => w,
        };
        let template = match (self.packed, self.kind) {
            (true, Kind::MaxPool) => MAX_POOL_PACKED,
            (true, _) => MAX_POOL_BACKWARD_PACKED,
            (false, kind) => kind.template(),
        };
        w.part(template).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let floats = DType::ALL.into_iter().filter(|&d| repr.computes(d));
        let mut all: Vec<Key> = floats.flat_map(|dtype| KINDS.map(|kind| Key { kind, dtype, packed: false })).collect();
        let packed = [Kind::MaxPool, Kind::MaxPoolBackward, Kind::MaxPoolBackwardTiles];
        all.extend(packed.map(|kind| Key { kind, dtype: DType::BF16, packed: true }));
        all
    }
}

/// Whether some window fits, with no zero sizes: the CPU backend's check, which otherwise
/// reports the error (so a bad geometry goes there).
fn geometry_ok(w: &Window2d) -> bool {
    let (k, s, d, p) = (w.kernel, w.stride, w.dilation, w.padding);
    let fits = |size: usize, p: usize, d: usize, k: usize| size + 2 * p > d * (k - 1);
    ![k.0, k.1, s.0, s.1, d.0, d.1].contains(&0) && fits(w.h, p.0, d.0, k.0) && fits(w.w, p.1, d.1, k.1)
}

/// `v` as three f32s whose sum, taken in f64 from the left, is exactly `v` (72 bits of
/// mantissa cover f64's 53), or `None` for the few finite values outside f32's exponent range.
fn split_pad(v: f64) -> Option<[u32; 3]> {
    let a = v as f32;
    if !v.is_finite() {
        return Some([a.to_bits(), 0, 0]);
    }
    let b = (v - a as f64) as f32;
    let c = (v - a as f64 - b as f64) as f32;
    (a as f64 + b as f64 + c as f64 == v).then_some([a.to_bits(), b.to_bits(), c.to_bits()])
}

crate::shader_params! {
    /// A window kernel's block (`shaders/window_geometry.wgsl`): the invocations, the geometry,
    /// the input view's offset, and three words of the kernel's own (`extra`: im2col's pad
    /// value, average pooling's count_include_pad, max pooling's -inf, its gradient's indices'
    /// offset).
    struct WindowParams {
        invocations: u32,
        h: u32,
        w: u32,
        kh: u32,
        kw: u32,
        sh: u32,
        sw: u32,
        ph: u32,
        pw: u32,
        dh: u32,
        dw: u32,
        out_h: u32,
        out_w: u32,
        offset: u32,
        extra: [u32; 3],
    }
}

/// The meta block: invocations, geometry, the input's offset, three kernel-specific words.
/// `None` when a value exceeds 32 bits.
fn window_meta(w: &Window2d, invocations: usize, offset: usize, input_len: usize, extra: [u32; 3]) -> Option<Meta> {
    // Every index a kernel forms stays below these (padded rows too).
    let bounds = [offset + input_len, (w.h + 2 * w.padding.0) * (w.w + 2 * w.padding.1) * w.n * w.c];
    for b in bounds {
        u32::try_from(b).ok()?;
    }
    let u = |v: usize| u32::try_from(v).ok();
    Some(words(&WindowParams {
        invocations: u(invocations)?,
        h: u(w.h)?,
        w: u(w.w)?,
        kh: u(w.kernel.0)?,
        kw: u(w.kernel.1)?,
        sh: u(w.stride.0)?,
        sw: u(w.stride.1)?,
        ph: u(w.padding.0)?,
        pw: u(w.padding.1)?,
        dh: u(w.dilation.0)?,
        dw: u(w.dilation.1)?,
        out_h: u(w.out_h())?,
        out_w: u(w.out_w())?,
        offset: u(offset)?,
        extra,
    }))
}

/// A kernel's outputs, or why it cannot run here (appended to the fallback's description).
type Native = std::result::Result<Vec<Storage>, Why>;

impl WgpuBackend {
    /// Runs the `kind` kernel over `x`, returning its outputs (values, then indices for max
    /// pooling), or why this device cannot: the caller then falls back to the CPU.
    fn window_kernel(&self, kind: Kind, x: Strided, w: &Window2d, extra: [u32; 3]) -> Result<Native> {
        let dtype = x.dtype;
        let pool = matches!(kind, Kind::AvgPool | Kind::AvgPoolBackward);
        if !self.repr.computes(dtype) || !geometry_ok(w) || x.layout.shape() != kind.input_shape(w) || (pool && w.dilation != (1, 1)) {
            return Ok(Err(Why::Unsupported));
        }
        // The tensor layer hands over contiguous views; anything else is made so first.
        let held;
        let contiguous = Layout::contiguous(x.layout.shape());
        let x = if x.layout.is_contiguous() {
            x
        } else {
            held = self.copy_view(x)?;
            Strided { storage: &*held, layout: &contiguous, dtype }
        };
        let n = kind.outputs(w);
        let Some(meta) = window_meta(w, n, x.layout.offset(), x.layout.numel(), extra) else { return Ok(Err(WIDE)) };
        // Only max pooling reads packed bf16 (`kernel_trait.rs` widens it for the others).
        let packed = crate::packed::packed_view(&x);
        let mut outs = vec![if packed { self.packed_output(n)? } else { self.output(dtype, n)? }];
        if kind == Kind::MaxPool {
            outs.push(self.output(DType::I64, n)?);
        }
        let gpu = self.gpu()?;
        let mut buffers = vec![gpu_storage(&x).buffer()];
        buffers.extend(outs.iter().map(|o| o.buffer()));
        let kernel = gpu.kernel(Key { kind, dtype, packed })?;
        gpu.dispatch(&kernel, &meta, &buffers, grid(if packed { n.div_ceil(2) } else { n }))?;
        Ok(Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect()))
    }

    /// Max pooling's gradient from `dy` and the forward's `indices` (`ops::MaxPool2dBackward`):
    /// `None` where this device leaves it to the composite (a dtype it does not compute, a bad
    /// geometry, shapes that do not match it, sizes past 32 bits); its kernel is
    /// `plan::max_pool_backward`'s.
    pub(crate) fn max_pool2d_backward_op(&self, dy: Strided, indices: Strided, w: &Window2d) -> Option<Result<Storage>> {
        let kind = match plan::max_pool_backward(w) {
            PoolBackward::Tiles => Kind::MaxPoolBackwardTiles,
            PoolBackward::Windows => Kind::MaxPoolBackward,
        };
        let dtype = dy.dtype;
        let shape = kind.input_shape(w);
        if !self.repr.computes(dtype) || !geometry_ok(w) || indices.dtype != DType::I64 || dy.layout.shape() != shape || indices.layout.shape() != shape {
            return None;
        }
        if !dy.layout.is_contiguous() || !indices.layout.is_contiguous() {
            return None;
        }
        let n = kind.outputs(w);
        // The indices' offset, and the last index read past it, in 32 bits.
        u32::try_from(indices.layout.offset() + indices.layout.numel()).ok()?;
        let meta = window_meta(w, n, dy.layout.offset(), dy.layout.numel(), [indices.layout.offset() as u32, 0, 0])?;
        let packed = crate::packed::packed_view(&dy);
        Some((|| {
            let out = if packed { self.packed_output(n)? } else { self.output(dtype, n)? };
            let gpu = self.gpu()?;
            let kernel = gpu.kernel(Key { kind, dtype, packed })?;
            gpu.dispatch(
                &kernel,
                &meta,
                &[gpu_storage(&dy).buffer(), gpu_storage(&indices).buffer(), out.buffer()],
                grid(if packed { n.div_ceil(2) } else { n }),
            )?;
            Ok(Arc::new(out) as Storage)
        })())
    }

    pub(crate) fn im2col_op(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage> {
        let pad = if x.dtype == DType::F64 { split_pad(pad_value) } else { Some([(pad_value as f32).to_bits(), 0, 0]) };
        let out = match pad {
            Some(extra) => self.window_kernel(Kind::Im2col, x, &window, extra)?,
            None => Err(Why::Limit("pad value beyond f32's range")),
        };
        match out {
            Ok(mut v) => Ok(v.remove(0)),
            Err(why) => self.fallback1(format!("im2col ({})", x.dtype), why, &[x], x.dtype, |cpu, v| cpu.im2col(v[0], window, pad_value)),
        }
    }

    pub(crate) fn col2im_op(&self, cols: Strided, window: Window2d) -> Result<Storage> {
        match self.window_kernel(Kind::Col2im, cols, &window, [0, 0, 0])? {
            Ok(mut v) => Ok(v.remove(0)),
            Err(why) => self.fallback1(format!("col2im ({})", cols.dtype), why, &[cols], cols.dtype, |cpu, v| cpu.col2im(v[0], window)),
        }
    }

    pub(crate) fn max_pool2d_op(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)> {
        let mut r = match self.window_kernel(Kind::MaxPool, x, &window, [f32::NEG_INFINITY.to_bits(), 0, 0])? {
            Ok(v) => v,
            Err(why) => self.fallback(format!("max_pool2d ({})", x.dtype), why, &[x], &[x.dtype, DType::I64], |cpu, v| {
                let (a, b) = cpu.max_pool2d(v[0], window)?;
                Ok(vec![a, b])
            })?,
        };
        let idx = r.pop().expect("two outputs");
        Ok((r.pop().expect("two outputs"), idx))
    }

    pub(crate) fn avg_pool2d_op(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        match self.window_kernel(Kind::AvgPool, x, &window, [count_include_pad as u32, 0, 0])? {
            Ok(mut v) => Ok(v.remove(0)),
            Err(why) => self.fallback1(format!("avg_pool2d ({})", x.dtype), why, &[x], x.dtype, |cpu, v| cpu.avg_pool2d(v[0], window, count_include_pad)),
        }
    }

    pub(crate) fn avg_pool2d_backward_op(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        match self.window_kernel(Kind::AvgPoolBackward, dy, &window, [count_include_pad as u32, 0, 0])? {
            Ok(mut v) => Ok(v.remove(0)),
            Err(why) => self.fallback1(format!("avg_pool2d_backward ({})", dy.dtype), why, &[dy], dy.dtype, |cpu, v| {
                cpu.avg_pool2d_backward(v[0], window, count_include_pad)
            }),
        }
    }
}
