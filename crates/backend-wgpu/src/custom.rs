//! What a GPU kernel written outside this crate needs: the kernel of a custom op
//! (`liandan_tensor::custom`) whose own crate writes it for this backend (an optimizer's update
//! in `liandan-train`), reaching the backend through `Backend::downcast_ref::<WgpuBackend>()`.
//!
//! The kernel's WGSL is put together as this crate's own are ([`Shader`]: the dtype prelude,
//! constants, its named parameter block, its `.wgsl` parts), compiled once per variant and kept
//! ([`WgpuBackend::pipeline`], keyed by the op's name and a variant number the op chooses),
//! and dispatched with its parameter block and its buffers ([`WgpuBackend::dispatch`]), in the
//! same batches as every other kernel. bf16 sits packed two to a word at rest: a kernel that
//! computes on one element per invocation runs inside [`WgpuBackend::widened`].

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::gpu::{CustomKey, Kernel};
use crate::kernels::Wgsl;
use crate::packed::packed_view;
use crate::params::ShaderParams;
use crate::storage::WgpuStorage;

/// Invocations per workgroup of the 1-D grids ([`grid`]); a kernel's entry point declares
/// `@workgroup_size(256)` and finds its element with `flat_id` (`shaders/ids.wgsl`).
pub const WORKGROUP: usize = crate::kernels::WG;

/// A grid of [`WORKGROUP`]-wide workgroups covering `n` invocations (split in two dimensions
/// past the 65,535 workgroups one may hold; `flat_id` undoes the split).
pub fn grid(n: usize) -> (u32, u32, u32) {
    crate::kernels::grid(n)
}

/// A compiled kernel of a custom op ([`WgpuBackend::pipeline`]).
#[derive(Clone)]
pub struct Pipeline(Arc<Kernel>);

/// A custom kernel's WGSL, put together as this crate's kernels are: `enable` directives and the
/// dtype prelude (`S_x`, `load_x`, `store_x`, `quantize_x` for the element type named `x`,
/// `repr.rs`), `const` declarations, the parameter block `p` ([`Shader::params`]), the shared
/// helpers (`flat_id`), then the kernel's `.wgsl` parts in order.
pub struct Shader<'r>(pub(crate) Wgsl<'r>);

impl Shader<'_> {
    /// Elements named `name` are of `dtype` (`alias S_name`, `load_name`, `store_name`, ...).
    pub fn ty(self, name: &'static str, dtype: DType) -> Self {
        Shader(self.0.ty(name, dtype))
    }

    /// `const name: u32 = value;`
    pub fn uint(self, name: &str, value: u32) -> Self {
        Shader(self.0.uint(name, value))
    }

    /// `const name: bool = value;`
    pub fn flag(self, name: &str, value: bool) -> Self {
        Shader(self.0.flag(name, value))
    }

    /// The parameter block: the kernel reads `p`, of the struct `Params` generated from `P`
    /// ([`crate::shader_params!`]).
    pub fn params<P: ShaderParams>(self) -> Self {
        Shader(self.0.params::<P>())
    }

    /// Appends WGSL text: a `.wgsl` file of the kernel's, by `include_str!`.
    pub fn part(self, wgsl: &'static str) -> Self {
        Shader(self.0.part(wgsl))
    }

    /// The whole source.
    pub fn build(self) -> String {
        self.0.build()
    }
}

impl WgpuBackend {
    /// The pipeline of the custom kernel `name`, `variant`, compiling the source `source`
    /// writes the first time (it is handed a [`Shader`] for this device) and keeping it for
    /// every later call. An error names the kernel where its WGSL does not build.
    pub fn pipeline(&self, name: &'static str, variant: u64, source: impl FnOnce(Shader) -> String) -> Result<Pipeline> {
        let gpu = self.gpu()?;
        let repr = gpu.repr;
        gpu.custom_kernel(CustomKey { name, variant }, || source(Shader(Wgsl::new(&repr)))).map(Pipeline)
    }

    /// Records one dispatch of `pipeline` over `groups` workgroups with the parameter block
    /// `params` and `buffers` bound at bindings 1, 2, ... in order (whole buffers; a kernel
    /// reads a view at an offset through its parameters).
    pub fn dispatch<P: ShaderParams>(&self, pipeline: &Pipeline, params: &P, buffers: &[&WgpuStorage], groups: (u32, u32, u32)) -> Result<()> {
        let words: &[u32] = bytemuck::cast_slice(std::slice::from_ref(params));
        let buffers: Vec<&wgpu::Buffer> = buffers.iter().map(|s| s.buffer()).collect();
        self.gpu()?.dispatch(&pipeline.0, words, &buffers, groups)
    }

    /// A fresh buffer for `numel` elements of `dtype` as kernels compute on them (bf16 one to a
    /// word), for a kernel's output; an error naming the bytes where the device cannot hold it.
    pub fn alloc(&self, dtype: DType, numel: usize) -> Result<WgpuStorage> {
        self.output(dtype, numel)
    }

    /// [`WgpuBackend::alloc`], its elements zero (a clear recorded before the work that
    /// follows): for a kernel that accumulates into its output, such as a flag it marks.
    pub fn alloc_zeroed(&self, dtype: DType, numel: usize) -> Result<WgpuStorage> {
        let out = self.output(dtype, numel)?;
        let bytes = (out.numel * out.elem_bytes).next_multiple_of(4).max(4);
        self.gpu()?.clear_buffer(out.buffer(), 0, bytes as u64);
        Ok(out)
    }

    /// Whether float kernels compute on `dtype` here (f64 only where the device has it).
    pub fn computes(&self, dtype: DType) -> bool {
        self.repr.computes(dtype)
    }

    /// Whether every view of `inputs` and every output (`outputs` elements of `dtype` each)
    /// fits one storage binding with 32-bit element offsets, as a kernel binds them.
    pub fn fits(&self, dtype: DType, outputs: &[usize], inputs: &[Strided]) -> Result<bool> {
        Ok(self.fused_gpu(dtype, outputs, inputs).transpose()?.is_some())
    }

    /// Storage buffers one kernel may bind here, its parameter block's included.
    pub fn max_bindings(&self) -> Result<usize> {
        let limits = &self.gpu()?.limits;
        Ok(limits.max_storage_buffers_per_shader_stage.min(limits.max_bindings_per_bind_group) as usize)
    }

    /// Runs `kernel` on `inputs` with every packed bf16 view widened to one element a word,
    /// and packs its bf16 outputs; `None` where `kernel` declines (the op's composite runs).
    pub fn widened(&self, inputs: &[Strided], kernel: impl FnOnce(&[Strided]) -> Option<Result<Vec<Storage>>>) -> Option<Result<Vec<Storage>>> {
        self.staged_fused(false, inputs, kernel)
    }

    /// Whether a view is bf16 packed two to a word (which [`WgpuBackend::widened`] widens).
    pub fn is_packed(view: &Strided) -> bool {
        packed_view(view)
    }
}

impl WgpuStorage {
    /// The buffer of a view handed to this backend's kernels.
    ///
    /// # Panics
    /// If the view is another backend's: a custom op's kernel is called by the backend that
    /// holds its inputs, so this is a broken invariant, not a user error.
    pub fn of<'a>(view: &Strided<'a>) -> &'a WgpuStorage {
        gpu_storage(view)
    }
}
