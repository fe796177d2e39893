//! Winograd F(2x2, 3x3) (Lavin and Gray, 2016) for f32 3x3 convolutions of stride 1,
//! padding 1, no dilation and one group. The forward: each 2 x 2 tile of the output is 16
//! products of a transformed 4 x 4 input patch with a transformed kernel, where the direct
//! convolution takes 36, so the 16 batched products (`[M, K] x [K, P]`, one per point of the
//! 4 x 4 transform, P the tiles) do 2.25x fewer multiply-adds than the implicit GEMM. Four
//! dispatches: the kernels' transform (`shaders/conv/winograd/weight.wgsl`), the patches'
//! (`input.wgsl`), the batched product (the ordinary matmul), the outputs' (`output.wgsl`).
//!
//! The input gradient of such a convolution is the same convolution of dy with each kernel
//! turned by 180 degrees and its channels swapped, which the kernels' transform reads so. The
//! weight gradient is F(3x3, 2x2), the transpose of the forward's algorithm: each tile's 2 x 2
//! of dy transformed (`dy.wgsl`) times the same transformed patches of x, summed over the tiles
//! by the product (`[O, P] x [P, C]`, 16 of them), then 4 x 4 back to 3 x 3 taps
//! (`weight_out.wgsl`). The transforms' coefficients are 0, 1/2 and 1; the results stay within
//! a small multiple of the direct sums' rounding (`tests/conv_winograd.rs` checks all three
//! passes against the CPU's direct convolution).
//!
//! Where it runs ([`wanted`]): the rule takes layers of at least [`MIN_CHANNELS`] input and
//! output channels, where the products' work dwarfs the transforms' memory traffic (on the
//! H200, resnet18's 64-channel layers ran slower this way: docs/PERFORMANCE.md, runs
//! 136-137), and whose intermediates stay under [`MAX_INTERMEDIATE`]. Passes the tensor cores
//! take (f16, or f32 under `LIANDAN_CONV_TF32`) stay there. `LIANDAN_CONV_WINOGRAD=0` turns it
//! off (the implicit GEMM for every pass), `=1` on for every convolution it can take, to
//! compare. The intermediates are the transformed input and output (`16 P K` and `16 P M` f32s:
//! 4x the input and the output) and the transformed kernels, held for the pass alone.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use liandan_tensor::{ConvGeometry, DType, Layout, Result, Storage, Strided};

use super::{wgpu_buffer, Pass};
use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::repr::Repr;

const INPUT: &str = include_str!("../shaders/conv/winograd/input.wgsl");
const WEIGHT: &str = include_str!("../shaders/conv/winograd/weight.wgsl");
const OUTPUT: &str = include_str!("../shaders/conv/winograd/output.wgsl");
const DY: &str = include_str!("../shaders/conv/winograd/dy.wgsl");
const WEIGHT_OUT: &str = include_str!("../shaders/conv/winograd/weight_out.wgsl");

/// The rule's least channel count on both sides of the product (see the module docs).
pub(super) const MIN_CHANNELS: usize = 128;
/// The largest intermediate (bytes) the rule accepts: past it the implicit GEMM, which needs
/// none, runs (an ImageNet-sized 56 x 56 layer of 128 channels at batch 128 would need 822 MB
/// for each of two).
const MAX_INTERMEDIATE: usize = 256 << 20;

/// One of the three transforms (the product between them is the matmul's kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// The patches of x (or dy) into `[16, K, P]`.
    Input,
    /// The kernels into `[16, M, K]`; `flip`: the input gradient's (turned, channels swapped).
    Weight { flip: bool },
    /// The products `[16, M, P]` into y `[N, M, H, W]`.
    Output,
    /// The weight gradient's dy into `[16, O, P]`.
    Dy,
    /// The weight gradient's products `[16, O, C]` into dw `[O, C, 3, 3]`.
    WeightOut,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).ty("x", DType::F32);
        match *self {
            Key::Input => w.part(INPUT).build(),
            Key::Weight { flip } => w.flag("FLIP", flip).part(WEIGHT).build(),
            Key::Output => w.part(OUTPUT).build(),
            Key::Dy => w.part(DY).build(),
            Key::WeightOut => w.part(WEIGHT_OUT).build(),
        }
    }

    fn all(_: &Repr) -> Vec<Key> {
        vec![Key::Input, Key::Weight { flip: false }, Key::Weight { flip: true }, Key::Output, Key::Dy, Key::WeightOut]
    }
}

thread_local! {
    /// `with_conv_winograd`'s setting on this thread: `None` leaves it to the environment.
    static FORCED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// `LIANDAN_CONV_WINOGRAD`, read once: `Some(false)` for `0`, `off` or `false`, `Some(true)` for
/// `1`, `on` or `true`, `None` (the rule) otherwise.
fn env_setting() -> Option<bool> {
    static SETTING: OnceLock<Option<bool>> = OnceLock::new();
    *SETTING.get_or_init(|| match std::env::var("LIANDAN_CONV_WINOGRAD").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Ok("0" | "off" | "false") => Some(false),
        Ok("1" | "on" | "true") => Some(true),
        _ => None,
    })
}

/// Runs `f` with every convolution Winograd can take running on it (`true`) or none (`false`)
/// on this thread, over `LIANDAN_CONV_WINOGRAD` and the rule: for tests and benchmarks.
#[doc(hidden)]
pub fn with_conv_winograd<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FORCED.with(|c| c.replace(Some(on))));
    f()
}

/// Whether a pass of `g` on these operands (two: no bias) runs as Winograd: a shape it
/// computes, and the setting or the rule says so. The caller keeps passes the tensor cores
/// take off it.
pub(super) fn wanted(g: &ConvGeometry, dtype: DType, inputs: &[Strided]) -> bool {
    let shape = g.kernel == (3, 3) && g.stride == (1, 1) && g.padding == (1, 1) && g.dilation == (1, 1) && g.groups == 1;
    let operands = inputs.len() == 2 && inputs.iter().all(|v| v.layout.is_contiguous());
    if dtype != DType::F32 || !shape || !operands || g.n * g.h * g.w == 0 {
        return false;
    }
    match FORCED.with(|c| c.get()).or_else(env_setting) {
        Some(on) => on,
        None => {
            let tiles = g.n * g.h.div_ceil(2) * g.w.div_ceil(2);
            let small = 16 * 4 * tiles * g.c.max(g.o) <= MAX_INTERMEDIATE;
            g.c >= MIN_CHANNELS && g.o >= MIN_CHANNELS && small && !super::conv_tf32()
        }
    }
}

impl WgpuBackend {
    /// `pass` of `g` as Winograd (see the module docs), or `None` where an intermediate would
    /// pass 32-bit indexing or one binding.
    pub(super) fn conv_winograd(&self, pass: Pass, g: &ConvGeometry, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let (h, wd) = (g.h, g.w);
        let (tw, tiles) = (wd.div_ceil(2), h.div_ceil(2) * wd.div_ceil(2));
        let p = g.n * tiles;
        // The product's rows and columns (the weight gradient's), or rows and depth.
        let (m, k) = match pass {
            Pass::Forward | Pass::Weight => (g.o, g.c),
            Pass::Input => (g.c, g.o),
        };
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        let fits = |numel: usize| u32::try_from(numel).is_ok() && self.repr.buffer_bytes(DType::F32, numel) <= limit;
        if ![16 * m * k, 16 * k * p, 16 * m * p, g.n * m * h * wd, 9 * m * k].into_iter().all(fits) {
            return None;
        }
        let words = |v: &[usize]| v.iter().map(|&w| u32::try_from(w).ok()).collect::<Option<Vec<u32>>>();
        let (a, b) = (&inputs[0], &inputs[1]);
        // The patches' transform of x (or dy): b of the forward's product (and the input
        // gradient's), b transposed of the weight gradient's.
        let patches = if pass == Pass::Weight { b } else { a };
        let input_meta = words(&[k * p, p, tiles, tw, h, wd, patches.layout.offset(), k])?;
        let (first_meta, output_meta) = match pass {
            Pass::Weight => (words(&[m * p, p, tiles, tw, h, wd, a.layout.offset(), m])?, words(&[m * k])?),
            _ => (words(&[m * k, m, k, b.layout.offset()])?, words(&[m * p, p, tiles, tw, h, wd, m])?),
        };
        Some((|| {
            // a of the product: the kernels' transform, or dy's (the weight gradient).
            let (first, a_len, out_len) = match pass {
                Pass::Forward => (Key::Weight { flip: false }, 16 * m * k, g.n * m * h * wd),
                Pass::Input => (Key::Weight { flip: true }, 16 * m * k, g.n * m * h * wd),
                Pass::Weight => (Key::Dy, 16 * m * p, 9 * m * k),
            };
            let (from, count) = if pass == Pass::Weight { (a, m * p) } else { (b, m * k) };
            let u = Arc::new(self.output(DType::F32, a_len)?) as Storage;
            let kernel = gpu.kernel(first)?;
            gpu.dispatch(&kernel, &first_meta, &[gpu_storage(from).buffer(), wgpu_buffer(&u)], grid(count))?;
            let v = Arc::new(self.output(DType::F32, 16 * k * p)?) as Storage;
            let kernel = gpu.kernel(Key::Input)?;
            gpu.dispatch(&kernel, &input_meta, &[gpu_storage(patches).buffer(), wgpu_buffer(&v)], grid(k * p))?;
            let (lu, lv) = match pass {
                // [16, O, P] x [16, C, P] transposed.
                Pass::Weight => (Layout::new(vec![16, m, p], vec![m * p, p, 1], 0), Layout::new(vec![16, p, k], vec![k * p, 1, p], 0)),
                _ => (Layout::new(vec![16, m, k], vec![m * k, k, 1], 0), Layout::new(vec![16, k, p], vec![k * p, p, 1], 0)),
            };
            let product = self.matmul_op(Strided { storage: &*u, layout: &lu, dtype: DType::F32 }, Strided { storage: &*v, layout: &lv, dtype: DType::F32 })?;
            let y = self.output(DType::F32, out_len)?;
            let last = if pass == Pass::Weight { Key::WeightOut } else { Key::Output };
            let kernel = gpu.kernel(last)?;
            let count = if pass == Pass::Weight { m * k } else { m * p };
            gpu.dispatch(&kernel, &output_meta, &[wgpu_buffer(&product), y.buffer()], grid(count))?;
            Ok(vec![Arc::new(y) as Storage])
        })())
    }
}
