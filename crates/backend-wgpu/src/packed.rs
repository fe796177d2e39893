//! bf16 at rest: two elements to a 32-bit word, half the memory of the f32 word the kernels
//! compute on (`repr.rs`).
//!
//! A bf16 tensor's storage holds 16-bit elements (element `2w` in the low half of word `w`,
//! which is also the little-endian byte order the host uses, so uploads and downloads copy the
//! bytes as they are). The kernels index their operands one element per invocation, and
//! neighbouring invocations cannot store halves of one word without racing, so the
//! boundary of the kernel trait converts: a packed operand is widened to f32 words by one
//! kernel ([`Key::Widen`], exact), the op runs on those, and a bf16 result is packed back by
//! another ([`Key::Pack`], which rounds to nearest even and writes each word from one
//! invocation). The widened copies are released when the op returns; what stays (weights,
//! activations saved for backward, optimizer state) takes two bytes an element.
//!
//! A cast into bf16 packs its source directly (one pass), and a cast from bf16 to f32 is the
//! widening itself.

use std::sync::Arc;

use liandan_tensor::backend::{BinaryOp, CmpOp, UnaryOp};
use liandan_tensor::{BackendStorage, DType, Layout, Result, Storage, Strided};

use liandan_tensor::fallback::{on_cpu, HostTensor};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{dense, KernelKey, Wgsl};
use crate::launch::{strided, Operand};
use crate::repr::Repr;
use crate::storage::{WgpuStorage, PACKED};

/// One conversion kernel between packed bf16 and the kernels' words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// A packed bf16 view to dense f32 words (bf16 as the kernels hold it).
    Widen,
    /// A view of a float dtype computed here to dense packed bf16.
    Pack(DType),
    /// One part of a join along a later dimension, its runs of words copied into place
    /// (`shaders/packed/join.wgsl`).
    Join,
}

crate::shader_params! {
    /// `shaders/packed/join.wgsl`: `rows` runs of `run` words from word `first` of the part,
    /// written `stride` words apart from word `start` of the join.
    pub(crate) struct JoinParams {
        pub rows: u32,
        pub run: u32,
        pub stride: u32,
        pub first: u32,
        pub start: u32,
    }
}

impl Key {
    /// Elements one invocation handles (`launch` sizes the grid by it).
    pub(crate) fn per_invocation(&self) -> usize {
        match self {
            Key::Widen => 4,
            Key::Pack(_) => 2,
            Key::Join => 2,
        }
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr);
        match *self {
            Key::Widen => with_words(w.strided()).part(include_str!("shaders/packed/widen.wgsl")).part(include_str!("shaders/elementwise4.wgsl")),
            Key::Pack(from) => with_words(w.strided().ty("x", from)).part(include_str!("shaders/packed/pack.wgsl")).part(ENTRY2),
            Key::Join => w.params::<JoinParams>().part(include_str!("shaders/packed/join.wgsl")),
        }
        .build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let mut all = vec![Key::Widen, Key::Join];
        all.extend(DType::ALL.into_iter().filter(|&d| repr.computes(d)).map(Key::Pack));
        all
    }
}

/// The entry point of the kernels that write packed bf16 a word an invocation (`value_(i)`
/// and `put_(w, word)` from the file before it).
pub(crate) const ENTRY2: &str = include_str!("shaders/packed/entry2.wgsl");

/// `w` with the packed-word helpers (`shaders/packed/words.wgsl`: `widen_`, `widen4_`,
/// `narrow_`, `narrow2_`) and the bf16 rounding they use.
pub(crate) fn with_words(w: Wgsl<'_>) -> Wgsl<'_> {
    w.ty("b", DType::BF16).part(include_str!("shaders/packed/words.wgsl"))
}

/// A packed bf16 view as a launch operand.
pub(crate) fn packed_operand<'a>(s: &Strided<'a>) -> Operand<'a> {
    Operand { buffer: gpu_storage(s).buffer(), layout: Some(s.layout), elem: PACKED as u64 }
}

/// A dense packed bf16 output as a launch operand.
pub(crate) fn packed_out(out: &WgpuStorage) -> Operand<'_> {
    Operand { buffer: out.buffer(), layout: None, elem: PACKED as u64 }
}

/// A view's elements are packed bf16.
pub(crate) fn packed_view(s: &Strided) -> bool {
    s.dtype == DType::BF16 && gpu_storage(s).is_packed()
}

/// Every operand but a condition (bool) is packed bf16: what a kernel that reads packed
/// operands as stored needs.
pub(crate) fn all_packed(views: &[Strided]) -> bool {
    views.iter().any(packed_view) && views.iter().all(|v| v.dtype == DType::Bool || packed_view(v))
}

/// The ops with kernels of their own on packed bf16 (`shaders/packed/`): two elements an
/// invocation, each output word written whole.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PackedKernel {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    Select,
}

/// Results of an op, packed where they are bf16 on their way out of the kernel trait.
pub(crate) trait Outputs: Sized {
    fn packed(self, b: &WgpuBackend) -> Result<Self>;
}

impl Outputs for Storage {
    fn packed(self, b: &WgpuBackend) -> Result<Self> {
        let s = self.as_any().downcast_ref::<WgpuStorage>().expect("own storage");
        if s.dtype != DType::BF16 || s.is_packed() {
            return Ok(self);
        }
        let layout = dense(&[s.numel]);
        b.pack(Strided { storage: &*self, layout: &layout, dtype: DType::BF16 }).map(|p| Arc::new(p) as Storage)
    }
}

impl Outputs for (Storage, Storage) {
    fn packed(self, b: &WgpuBackend) -> Result<Self> {
        Ok((self.0.packed(b)?, self.1.packed(b)?))
    }
}

impl<T: Outputs> Outputs for Vec<T> {
    fn packed(self, b: &WgpuBackend) -> Result<Self> {
        self.into_iter().map(|s| s.packed(b)).collect()
    }
}

impl WgpuBackend {
    /// A fresh buffer for `numel` packed bf16 elements.
    pub(crate) fn packed_output(&self, numel: usize) -> Result<WgpuStorage> {
        let gpu = self.gpu()?;
        let bytes = (numel as u64).saturating_mul(PACKED as u64).max(4).next_multiple_of(4);
        Ok(WgpuStorage { buf: gpu.alloc(bytes)?, elem_bytes: PACKED, numel, dtype: DType::BF16 })
    }

    /// The packed bf16 view `src` as dense f32 words (what the kernels compute bf16 on).
    pub(crate) fn widen(&self, src: Strided) -> Result<WgpuStorage> {
        let out = self.output(DType::BF16, src.layout.numel())?;
        let operands = [packed_operand(&src), Operand { buffer: out.buffer(), layout: None, elem: self.repr.gpu_size(DType::BF16) as u64 }];
        if let Err(why) = self.launch_kernel(Key::Widen.into(), Key::Widen.per_invocation(), src.layout.shape(), &operands, &strided)? {
            // The f32 values are the words.
            let bytes = self.cast_on_cpu(src, DType::F32, why)?;
            self.gpu()?.upload(out.buffer(), 0, &bytes)?;
        }
        Ok(out)
    }

    /// The view `src` of a float dtype (f32, f16, f64 where computed, or bf16 as f32 words)
    /// rounded to bf16 and packed, dense.
    pub(crate) fn pack(&self, src: Strided) -> Result<WgpuStorage> {
        let out = self.packed_output(src.layout.numel())?;
        let key = Key::Pack(src.dtype);
        let operands = [self.operand(&src), packed_out(&out)];
        let ran = match self.repr.computes(src.dtype) {
            true => self.launch_kernel(key.into(), key.per_invocation(), src.layout.shape(), &operands, &strided)?,
            false => Err(Why::Unsupported),
        };
        if let Err(why) = ran {
            // The host's bf16 bytes are the packed words.
            let bytes = self.cast_on_cpu(src, DType::BF16, why)?;
            self.gpu()?.upload(out.buffer(), 0, &bytes)?;
        }
        Ok(out)
    }

    /// Packed bf16 `parts` joined along `dim` as words, where each part is contiguous with an
    /// even offset and an even run a row (the elements from `dim` on): by buffer copies where
    /// nothing comes before `dim` (an RNN's stacked steps and their gradients), else by one
    /// kernel a part (attention's q, k and v gradients side by side); `None` elsewhere (the
    /// caller widens them and joins those).
    pub(crate) fn concat_packed(&self, parts: &[Strided], dim: usize) -> Result<Option<Storage>> {
        let mut shape = parts[0].layout.shape().to_vec();
        shape[dim] = parts.iter().map(|p| p.layout.shape()[dim]).sum();
        let (outer, inner) = (shape[..dim].iter().product::<usize>(), shape[dim + 1..].iter().product::<usize>());
        let words = |elements: usize| elements.is_multiple_of(2);
        let runs = parts.iter().all(|p| p.layout.is_contiguous() && words(p.layout.offset()) && words(p.layout.shape()[dim] * inner));
        if !runs {
            return Ok(None);
        }
        let out = self.packed_output(shape.iter().product())?;
        let gpu = self.gpu()?;
        // Word runs: one a part where the join is along the first dimension (buffer copies),
        // else one a part and row of the dimensions before it (a kernel a part).
        let stride = shape[dim] * inner / 2;
        let u = |v: usize| u32::try_from(v).map_err(|_| gpu.err("concat", "a join past 32-bit indexing"));
        let mut start = 0;
        for p in parts {
            let run = p.layout.shape()[dim] * inner / 2;
            let first = p.layout.offset() / 2;
            if run > 0 && outer == 1 {
                let bytes = 2 * PACKED as u64;
                gpu.copy_buffer(gpu_storage(p).buffer(), first as u64 * bytes, out.buffer(), start as u64 * bytes, run as u64 * bytes);
            } else if run > 0 && outer > 0 {
                let meta = JoinParams { rows: u(outer)?, run: u(run)?, stride: u(stride)?, first: u(first)?, start: u(start)? };
                u(outer * stride)?;
                let kernel = gpu.kernel(Key::Join)?;
                gpu.dispatch(&kernel, &crate::params::words(&meta), &[gpu_storage(p).buffer(), out.buffer()], crate::kernels::grid(outer * run))?;
            }
            start += run;
        }
        Ok(Some(Arc::new(out)))
    }

    /// `src` cast to `to` by the CPU backend, as host bytes (what a conversion that cannot run
    /// here falls back to, noted as every fallback is).
    fn cast_on_cpu(&self, src: Strided, to: DType, why: Why) -> Result<Vec<u8>> {
        let what = format!("cast ({} -> {to})", src.dtype);
        self.note_fallback(&what, why);
        let host = HostTensor { bytes: self.read_view(src)?, shape: src.layout.shape(), dtype: src.dtype };
        Ok(on_cpu(&what, vec![host], &[to], |cpu, v| Ok(vec![cpu.cast(v[0], to)?]))?.remove(0))
    }

    /// Runs `op` on `views` with every packed bf16 view widened to f32 words first, and packs
    /// its bf16 results.
    pub(crate) fn staged<R: Outputs>(&self, views: &[Strided], op: impl FnOnce(&[Strided]) -> Result<R>) -> Result<R> {
        if !views.iter().any(packed_view) {
            return op(views)?.packed(self);
        }
        let mut wide: Vec<(WgpuStorage, Layout)> = Vec::new();
        for v in views.iter().filter(|v| packed_view(v)) {
            wide.push((self.widen(*v)?, dense(v.layout.shape())));
        }
        let mut held = wide.iter();
        let staged: Vec<Strided> = views
            .iter()
            .map(|v| match packed_view(v) {
                true => {
                    let (s, layout) = held.next().expect("one widened copy per packed view");
                    Strided { storage: s as &dyn BackendStorage, layout, dtype: v.dtype }
                }
                false => *v,
            })
            .collect();
        op(&staged)?.packed(self)
    }

    /// `op` on `views` as they are stored where every bf16 view is packed (an op whose kernels
    /// read packed operands themselves: reduce, the products), else [`WgpuBackend::staged`].
    pub(crate) fn as_stored<R: Outputs>(&self, views: &[Strided], op: impl FnOnce(&[Strided]) -> Result<R>) -> Result<R> {
        match all_packed(views) {
            true => op(views)?.packed(self),
            false => self.staged(views, op),
        }
    }

    /// `kernel` (of `shaders/packed/`) on `views` where every bf16 view is packed and it can
    /// run them, else `op` through [`WgpuBackend::staged`].
    pub(crate) fn packed_kernel_or_staged(&self, kernel: PackedKernel, views: &[Strided], op: impl FnOnce(&[Strided]) -> Result<Storage>) -> Result<Storage> {
        if all_packed(views) {
            let ran = match (kernel, views) {
                (PackedKernel::Unary(o), &[x]) => self.unary_packed(o, x)?,
                (PackedKernel::Binary(o), &[l, r]) => self.binary_packed(o, l, r)?,
                (PackedKernel::Compare(o), &[l, r]) => self.compare_packed(o, l, r)?,
                (PackedKernel::Select, &[c, t, f]) => self.select_packed(c, t, f)?,
                _ => unreachable!("{kernel:?} takes other operands"),
            };
            if let Some(out) = ran {
                return Ok(out);
            }
        }
        self.staged(views, op)
    }

    /// [`WgpuBackend::as_stored`] (where `as_they_are`) or [`WgpuBackend::staged`] for a fused op, which may have no kernel here (`None`:
    /// the composite runs); packed operands are widened only when it has one.
    pub(crate) fn staged_fused<R: Outputs + Default>(
        &self,
        as_they_are: bool,
        views: &[Strided],
        op: impl FnOnce(&[Strided]) -> Option<Result<R>>,
    ) -> Option<Result<R>> {
        if as_they_are || !views.iter().any(packed_view) {
            return op(views).map(|r| r.and_then(|out| out.packed(self)));
        }
        let mut ran = true;
        let out = self.staged(views, |v| {
            op(v).unwrap_or_else(|| {
                ran = false;
                Ok(R::default())
            })
        });
        ran.then_some(out)
    }
}
