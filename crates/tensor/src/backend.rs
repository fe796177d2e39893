//! The kernel trait every backend implements, and the closed set of primitive ops.
//!
//! A backend runs forward kernels only: it knows nothing of autograd. Every method takes its
//! inputs as [`Strided`] views and returns a fresh, contiguous (row-major) [`Storage`]. Shapes,
//! dtypes and devices have already been checked by `liandan-tensor`, so a backend only fails for
//! its own reasons (out of memory, device lost) or for index values it finds out of range.
//! `docs/adding-an-op.md` lists the primitives and why each is one.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;

/// A backend's buffer. Backends downcast it back to their own type with [`BackendStorage::as_any`].
pub trait BackendStorage: Any + Send + Sync + Debug {
    fn as_any(&self) -> &dyn Any;
    /// Bytes held by this buffer.
    fn size_in_bytes(&self) -> usize;
}

/// Shared handle to a backend buffer. Views share one.
pub type Storage = Arc<dyn BackendStorage>;

/// A strided view of a storage: what every kernel reads.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    pub storage: &'a dyn BackendStorage,
    pub layout: &'a Layout,
    pub dtype: DType,
}

/// Elementwise functions of one float argument. Integer dtypes accept `Neg`, `Abs` and `Sign`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Exp,
    Log,
    Sqrt,
    Recip,
    Sin,
    Cos,
    /// The Gauss error function, for exact GELU.
    Erf,
    Floor,
    Ceil,
    /// Round half to even, as `torch.round`.
    Round,
}

/// Elementwise functions of two arguments of the same dtype (broadcast already applied).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// True division for floats; for integers, division rounding toward negative infinity
    /// (`torch.div(rounding_mode="floor")`), and an error on division by zero.
    Div,
    /// Floats only.
    Pow,
    Maximum,
    Minimum,
}

/// Elementwise comparisons; the result is `Bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Reductions along the middle axis of a contiguous `[outer, len, inner]` view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Accumulates in f32 for f16/bf16, in i64 for integers and bools.
    Sum,
    Max,
    Min,
    /// Index (`I64`) of the first maximum.
    ArgMax,
    /// Index (`I64`) of the first minimum.
    ArgMin,
}

/// How to fill a tensor with random values. All backends draw the same values from the same
/// seed: element `i` of the result is a function of `(seed, i)` alone, defined in [`crate::rng`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform on `[low, high)`.
    Uniform { low: f64, high: f64 },
    /// Normal with the given mean and standard deviation.
    Normal { mean: f64, std: f64 },
    /// 1 with probability `p`, else 0.
    Bernoulli { p: f64 },
}

/// The geometry of a 2-D sliding window over a `[N, C, H, W]` input, shared by convolution
/// (through im2col/col2im) and pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window2d {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

impl Window2d {
    /// Output height: `floor((H + 2p - d(k-1) - 1) / s) + 1`, as PyTorch.
    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.padding.0 - self.dilation.0 * (self.kernel.0 - 1) - 1) / self.stride.0 + 1
    }

    pub fn out_w(&self) -> usize {
        (self.w + 2 * self.padding.1 - self.dilation.1 * (self.kernel.1 - 1) - 1) / self.stride.1 + 1
    }

    /// Rows of the im2col matrix: `C * kh * kw`.
    pub fn col_rows(&self) -> usize {
        self.c * self.kernel.0 * self.kernel.1
    }

    /// Columns of the im2col matrix: `out_h * out_w`.
    pub fn col_cols(&self) -> usize {
        self.out_h() * self.out_w()
    }
}

/// What a device is, for `Device::best()` and `liandan info`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    Cpu,
    /// A software rasterizer posing as a GPU (lavapipe); picked only when asked for.
    SoftwareGpu,
    IntegratedGpu,
    DiscreteGpu,
}

/// A read-back started by [`Backend::to_host_later`].
pub trait HostRead: Send {
    /// Waits for the bytes (contiguous, native-endian, as [`Backend::to_host`] returns them).
    fn wait(self: Box<Self>) -> Result<Vec<u8>>;
}

/// A read-back already done.
pub struct Ready(pub Vec<u8>);

impl HostRead for Ready {
    fn wait(self: Box<Self>) -> Result<Vec<u8>> {
        Ok(self.0)
    }
}

/// The kernel trait. One implementation per backend; see the module docs for the contract.
///
/// Layout conventions, shared by all backends:
/// - `im2col` maps `[N, C, H, W]` to `[N, C*kh*kw, out_h*out_w]`, row `c*kh*kw + i*kw + j`
///   (PyTorch's `unfold`); padded positions read `pad_value`.
/// - `col2im` is its adjoint: it sums the columns back into `[N, C, H, W]`.
/// - pooling indices are `I64` offsets `h*W + w` within each `[H, W]` plane (PyTorch's).
pub trait Backend: Any + Send + Sync + Debug {
    /// A human-readable name, e.g. `cpu` or `NVIDIA H200 (Vulkan)`.
    fn name(&self) -> String;
    fn kind(&self) -> DeviceKind;

    /// Copies host bytes (native endian, `dtype` elements) into a new buffer.
    // `from_host` pairs with `to_host`; it is a method because the backend owns the buffer.
    #[allow(clippy::wrong_self_convention)]
    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage>;
    /// Copies a view back to the host as contiguous native-endian bytes. Waits for pending work.
    fn to_host(&self, src: Strided) -> Result<Vec<u8>>;
    /// Starts copying a view back to the host without waiting for the work recorded after it:
    /// the returned read waits only for the work that made `src` (PyTorch's non-blocking copy
    /// to pinned memory and an event). The default reads at once.
    fn to_host_later(&self, src: Strided) -> Result<Box<dyn HostRead>> {
        Ok(Box::new(Ready(self.to_host(src)?)))
    }
    /// [`Backend::to_host_later`] for a read taken a few steps on, by when the work recorded
    /// after it has gone to the device anyway: the copy rides in its batch of work instead of
    /// ending it (on a GPU, a batch ended early is one more submit). Taken while its batch is
    /// still being recorded, it waits for that whole batch. The default is `to_host_later`.
    fn to_host_later_in_batch(&self, src: Strided) -> Result<Box<dyn HostRead>> {
        self.to_host_later(src)
    }
    /// A buffer of `numel` elements all equal to `value` (converted to `dtype`).
    fn full(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage>;
    /// Seeded random fill; see [`Distribution`].
    fn random(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage>;

    /// Materializes a view in row-major order (also how views become contiguous).
    fn copy(&self, src: Strided) -> Result<Storage>;
    /// Converts element type; float to integer truncates toward zero, anything to bool is `!= 0`.
    fn cast(&self, src: Strided, to: DType) -> Result<Storage>;

    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage>;
    /// `lhs` and `rhs` have the same shape (broadcasting is done with zero strides) and dtype.
    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage>;
    /// Result dtype is `Bool`.
    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage>;
    /// `cond ? on_true : on_false`, all of one shape; `cond` is `Bool`.
    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage>;

    /// Reduces axis 1 of the contiguous view `x` of shape `[outer, len, inner]` to
    /// `[outer, inner]`. `len` is at least 1.
    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage>;

    /// Batched matrix product of `lhs` `[B, M, K]` and `rhs` `[B, K, N]` into `[B, M, N]`.
    /// Either view may have any strides (a stride of 0 on B broadcasts; transposes are free).
    fn matmul(&self, lhs: Strided, rhs: Strided) -> Result<Storage>;

    /// Unfolds sliding windows of the contiguous `[N, C, H, W]` input `x`.
    fn im2col(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage>;
    /// Folds `[N, C*kh*kw, L]` columns back to `[N, C, H, W]`, summing overlaps.
    fn col2im(&self, cols: Strided, window: Window2d) -> Result<Storage>;

    /// Max pooling of the contiguous `[N, C, H, W]` input: values and `I64` argmax indices,
    /// both `[N, C, out_h, out_w]`. Padding never wins.
    fn max_pool2d(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)>;
    /// Average pooling; `count_include_pad` as PyTorch. Dilation is 1.
    fn avg_pool2d(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage>;
    /// The adjoint of [`Backend::avg_pool2d`]: spreads `[N, C, out_h, out_w]` gradients over
    /// `[N, C, H, W]`.
    fn avg_pool2d_backward(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage>;

    /// `out[.., i, ..] = src[.., index[.., i, ..], ..]` along `dim`; `index` (`I64`) has the
    /// rank of `src` and sizes no larger than `src`'s off `dim`. Out-of-range indices are errors:
    /// from the op itself on a synchronous backend; an asynchronous one (a GPU) skips the bad
    /// element and returns the error from the next call that waits (a read-back or
    /// `synchronize`), so that indexing never stalls the queue.
    fn gather(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage>;
    /// A copy of `dst` with `src` added at `index` along `dim` (`index` and `src` share a
    /// shape, no larger than `dst` off `dim`).
    fn scatter_add(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage>;
    /// Picks the entries of the 1-D `I64` `index` along `dim`.
    fn index_select(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage>;
    /// Joins views of equal rank and dtype along `dim`.
    fn concat(&self, parts: &[Strided], dim: usize) -> Result<Storage>;

    /// Runs the custom op `op` (see [`crate::custom`]) as one kernel, or `None` (the default)
    /// where this backend has none: the op then runs its composite. A backend runs its own
    /// kernels for the ops it knows (downcasting `op` to read their parameters), and for any
    /// other op the kernel that the op's own crate wrote for this backend, `op.kernel(self,
    /// inputs)`; a backend that wraps another forwards the call. Inputs and outputs are as the
    /// op documents them; shapes and dtypes are checked before the call.
    fn custom(&self, op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let _ = (op, inputs);
        None
    }

    /// Waits until all submitted work has finished. A no-op for synchronous backends.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Allocator statistics, for backends with a caching allocator (`torch.mps` style).
    fn memory_stats(&self) -> Option<MemoryStats> {
        None
    }

    /// Returns cached, unused buffers to the driver.
    fn empty_cache(&self) {}

    /// Caps the bytes of live buffers: an allocation beyond `bytes` fails with
    /// [`crate::Error::OutOfMemory`], as on a full device (how the batch-size finder is tested,
    /// and how to try a smaller device's memory). `None` lifts the cap. Returns whether this
    /// backend keeps such accounts.
    fn set_memory_budget(&self, bytes: Option<u64>) -> bool {
        let _ = bytes;
        false
    }

    /// Starts [`MemoryStats::peak`] over from what is in use now.
    fn reset_peak_memory(&self) {}

    /// What was live at the last peak of [`MemoryStats::in_use`], grouped by where it was
    /// allocated, for backends that can keep it (the wgpu pool under
    /// `LIANDAN_MEMORY_BREAKDOWN=1`); `None` otherwise.
    fn memory_breakdown(&self) -> Option<String> {
        None
    }

    /// Ops this device handed to the CPU because it cannot run them, with how often.
    fn fallback_report(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Facts about the device for `liandan info`: name, API, type, features, limits, memory.
    fn describe(&self) -> Vec<(String, String)> {
        vec![("name".into(), self.name())]
    }
}

impl dyn Backend {
    /// This backend as its concrete type `B`, if it is one: how a custom op's kernel reaches
    /// the backend it was written for ([`CustomKernel::kernel`]).
    pub fn downcast_ref<B: Backend>(&self) -> Option<&B> {
        (self as &dyn Any).downcast_ref()
    }
}

/// The part of a custom op ([`crate::custom::CustomOp`]) that a backend sees: its name, its
/// value (a backend with a kernel for it downcasts it,
/// [`downcast_ref`](CustomKernel#method.downcast_ref), to read its parameters), and the
/// kernels that the op's own crate wrote for the backends it knows.
pub trait CustomKernel: Any + Send + Sync + Debug {
    /// What the op computes, in snake case (`lstm_cell`, `adam_step`): for errors, the
    /// profiler, and a GPU backend's pipeline cache.
    fn name(&self) -> &'static str;

    /// The op's kernel on `backend`, written by the crate that defines the op (which downcasts
    /// `backend` to the backend types it has kernels for,
    /// [`downcast_ref`](Backend#method.downcast_ref)); `None` (the default) where it has none
    /// for this backend or these inputs.
    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let _ = (backend, inputs);
        None
    }

    /// Floating-point operations of one call on `inputs`, for the profiler.
    fn flops(&self, inputs: &[Strided]) -> Option<u64> {
        let _ = inputs;
        None
    }

    /// What the profiler shows beside the inputs' shapes (a convolution's stride and padding).
    fn detail(&self) -> Option<String> {
        None
    }
}

impl dyn CustomKernel {
    /// This op as its concrete type `T`, if it is one.
    pub fn downcast_ref<T: CustomKernel>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }
}

/// The shape of one 2-D convolution and its gradients: input `[N, C, H, W]`, weight `[O,
/// C/groups, kh, kw]`, output `[N, O, out_h, out_w]`; kernel, stride, padding and dilation as
/// (height, width) pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeometry {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
    pub groups: usize,
}

impl ConvGeometry {
    /// The window over the input (`im2col`'s geometry).
    pub fn window(&self) -> Window2d {
        Window2d { n: self.n, c: self.c, h: self.h, w: self.w, kernel: self.kernel, stride: self.stride, padding: self.padding, dilation: self.dilation }
    }

    pub fn out_h(&self) -> usize {
        self.window().out_h()
    }

    pub fn out_w(&self) -> usize {
        self.window().out_w()
    }

    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }

    pub fn weight_shape(&self) -> [usize; 4] {
        [self.o, self.c / self.groups, self.kernel.0, self.kernel.1]
    }

    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.o, self.out_h(), self.out_w()]
    }

    /// Floating-point operations of one pass: its multiply-adds counted twice (each gradient
    /// does as many as the forward), as `torch.profiler`'s `with_flops` counts them.
    pub fn flops(&self) -> u64 {
        let [o, cg, kh, kw] = self.weight_shape();
        2 * (self.n * self.out_h() * self.out_w() * o * cg * kh * kw) as u64
    }
}

/// Memory held by a device's caching allocator, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in buffers owned by live tensors.
    pub in_use: u64,
    /// Bytes in freed buffers kept for reuse.
    pub pooled: u64,
    /// The most `in_use` has ever been.
    pub peak: u64,
    /// Buffers created from the driver so far (reuses not counted): flat after warm-up.
    pub allocations: u64,
    /// Bytes in host-to-device upload staging buffers not yet released (outside the pool; a
    /// backend bounds them).
    pub staging: u64,
}
