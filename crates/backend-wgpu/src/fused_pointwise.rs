//! Fused elementwise composites (ReLU, ReLU of a sum, GELU, binary cross-entropy, and their
//! gradients): one invocation per element of contiguous inputs of one shape, one output of that
//! shape, in one dispatch.

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::packed::{packed_view, with_words, ENTRY2};
use crate::params::words;
use crate::repr::Repr;

const ERF: &str = include_str!("shaders/erf.wgsl");
const RELU: &str = include_str!("shaders/fused_relu.wgsl");
const RELU_BACKWARD: &str = include_str!("shaders/fused_relu_backward.wgsl");
const ADD_RELU: &str = include_str!("shaders/fused_add_relu.wgsl");
const ADD_WIDE: &str = include_str!("shaders/fused_add_wide.wgsl");
/// `round_v`, a sum rounded to the dtype as it is stored: an element, or four.
const ROUND_V: [&str; 2] = [
    "fn round_v(v: f32) -> V_x { return store_x(v); }\n",
    "fn round_v(v: vec4<f32>) -> V_x { return V_x(store_x(v.x), store_x(v.y), store_x(v.z), store_x(v.w)); }\n",
];
const GELU: &str = include_str!("shaders/fused_gelu.wgsl");
const GELU_BACKWARD: &str = include_str!("shaders/fused_gelu_backward.wgsl");
const GELU_WIDE: &str = include_str!("shaders/fused_gelu_wide.wgsl");
const GELU_BACKWARD_WIDE: &str = include_str!("shaders/fused_gelu_backward_wide.wgsl");
const BCE: &str = include_str!("shaders/fused_bce.wgsl");
const BCE_BACKWARD: &str = include_str!("shaders/fused_bce_backward.wgsl");

crate::shader_params! {
    /// A fused elementwise kernel's block: its items (elements, or vec4s where wide), and
    /// each input's offset in items, in binding order.
    struct PointwiseParams {
        numel: u32,
        offsets: [u32; 3],
    }
}

/// An elementwise fused kernel: one per op of the tensor crate's it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pointwise {
    Relu,
    ReluBackward,
    AddRelu,
    /// An f32 tensor plus an f16 one, written in f32 (`Key::dtype` is the f16 operand's).
    AddWide,
    Gelu,
    GeluBackward,
    BceLoss,
    BceLossBackward,
}

impl Pointwise {
    /// Whether it has a variant on packed bf16 words (the others take widened copies).
    pub(crate) fn reads_packed(self) -> bool {
        matches!(self, Pointwise::Relu | Pointwise::ReluBackward | Pointwise::AddRelu | Pointwise::Gelu | Pointwise::GeluBackward)
    }

    /// Whether it has a variant on four elements an invocation (`Key::wide`).
    fn has_wide(self) -> bool {
        matches!(self, Pointwise::Relu | Pointwise::ReluBackward | Pointwise::AddRelu | Pointwise::AddWide | Pointwise::Gelu | Pointwise::GeluBackward)
    }
}

/// One elementwise fused kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    kernel: Pointwise,
    dtype: DType,
    /// Inputs and output are packed bf16 (`packed.rs`): two elements an invocation.
    packed: bool,
    /// Four elements an invocation, read and written as vec4s (the ReLUs, GELU and their
    /// gradients, where the count and every offset are multiples of four).
    wide: bool,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<PointwiseParams>().ty("x", self.dtype);
        // The items (an element or a vec4) and their f32 form; all but the ReLUs need erf.
        let w = match (self.kernel.has_wide(), self.wide) {
            (true, true) => w.alias("V_x", "vec4<S_x>").alias("C_v", "vec4<f32>"),
            (true, false) => w.alias("V_x", "S_x").alias("C_v", "f32"),
            (false, _) => w,
        };
        let w = if matches!(self.kernel, Pointwise::Relu | Pointwise::ReluBackward | Pointwise::AddRelu | Pointwise::AddWide) { w } else { w.part(ERF) };
        match (self.kernel, self.packed) {
            (Pointwise::Relu, false) => w.part(RELU),
            (Pointwise::ReluBackward, false) => w.part(RELU_BACKWARD),
            (Pointwise::AddRelu, false) => w.part(ROUND_V[self.wide as usize]).part(ADD_RELU),
            (Pointwise::AddRelu, true) => with_words(w).part(include_str!("shaders/packed/add_relu.wgsl")).part(ENTRY2),
            (Pointwise::AddWide, _) => w.part(ADD_WIDE),
            (Pointwise::Relu, true) => with_words(w).part(include_str!("shaders/packed/relu.wgsl")).part(ENTRY2),
            (Pointwise::ReluBackward, true) => with_words(w).part(include_str!("shaders/packed/relu_backward.wgsl")).part(ENTRY2),
            (Pointwise::Gelu, false) if self.wide => w.part(ROUND_V[1]).part(GELU_WIDE),
            (Pointwise::GeluBackward, false) if self.wide => w.part(ROUND_V[1]).part(GELU_BACKWARD_WIDE),
            (Pointwise::Gelu, false) => w.part(GELU),
            (Pointwise::GeluBackward, false) => w.part(GELU_BACKWARD),
            (Pointwise::Gelu, true) => with_words(w).part(include_str!("shaders/packed/gelu.wgsl")).part(ENTRY2),
            (Pointwise::GeluBackward, true) => with_words(w).part(include_str!("shaders/packed/gelu_backward.wgsl")).part(ENTRY2),
            (Pointwise::BceLoss, _) => w.part(BCE),
            (Pointwise::BceLossBackward, _) => w.part(BCE_BACKWARD),
        }
        .build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let kernels = [
            Pointwise::Relu,
            Pointwise::ReluBackward,
            Pointwise::AddRelu,
            Pointwise::Gelu,
            Pointwise::GeluBackward,
            Pointwise::BceLoss,
            Pointwise::BceLossBackward,
        ];
        let keys = kernels.into_iter().flat_map(|kernel| DType::ALL.map(|dtype| Key { kernel, dtype, packed: false, wide: false }));
        let mut all: Vec<Key> = keys.filter(|k| repr.computes(k.dtype) && k.dtype != DType::F64).collect();
        all.extend(repr.computes(DType::F16).then_some(Key { kernel: Pointwise::AddWide, dtype: DType::F16, packed: false, wide: false }));
        let wide: Vec<Key> = all.iter().filter(|k| k.kernel.has_wide()).map(|k| Key { wide: true, ..*k }).collect();
        all.extend(wide);
        let packed = [Pointwise::Relu, Pointwise::ReluBackward, Pointwise::AddRelu, Pointwise::Gelu, Pointwise::GeluBackward];
        all.extend(packed.map(|kernel| Key { kernel, dtype: DType::BF16, packed: true, wide: false }));
        all
    }
}

impl WgpuBackend {
    /// ReLU of `x` as one dispatch, or `None` where this kernel cannot take it.
    pub(crate) fn relu_kernel(&self, x: Strided) -> Option<Result<Vec<Storage>>> {
        self.fused_pointwise(Pointwise::Relu, &[x])
    }

    /// Runs an elementwise fused op as one dispatch, or `None` (f64, which the f32 erf and log
    /// cannot serve; buffers beyond one binding or 32-bit offsets).
    pub(crate) fn fused_pointwise(&self, kernel: Pointwise, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let first = inputs.first()?;
        let numel = first.layout.numel();
        // AddWide's kernel is keyed by its f16 operand and writes f32; the others keep one type.
        let (dtype, out_dtype) = match kernel {
            Pointwise::AddWide => match inputs {
                [a, b] if a.dtype == DType::F32 && b.dtype == DType::F16 && b.layout.numel() == numel => (DType::F16, DType::F32),
                _ => return None,
            },
            _ => (first.dtype, first.dtype),
        };
        if !self.repr.computes(dtype) || dtype == DType::F64 {
            return None;
        }
        let gpu = match self.fused_gpu(out_dtype, &[numel], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        // Packed bf16 inputs (all of them, as `Backend::custom` hands them over) make a packed
        // output, a word an invocation.
        let packed = packed_view(first);
        if packed && !kernel.reads_packed() {
            return None;
        }
        let wide = !packed && kernel.has_wide() && numel.is_multiple_of(4) && inputs.iter().all(|v| v.layout.offset().is_multiple_of(4));
        let per = if wide { 4 } else { 1 };
        let mut block = PointwiseParams { numel: (numel / per) as u32, ..Default::default() };
        for (offset, v) in block.offsets.iter_mut().zip(inputs) {
            *offset = u32::try_from(v.layout.offset() / per).ok()?;
        }
        let meta = words(&block);
        Some((|| {
            let kernel = gpu.kernel(Key { kernel, dtype, packed, wide })?;
            let out = if packed { self.packed_output(numel)? } else { self.output(out_dtype, numel)? };
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.push(out.buffer());
            gpu.dispatch(&kernel, &meta, &buffers, grid(if packed { numel.div_ceil(2) } else { numel / per }))?;
            Ok(vec![Arc::new(out) as Storage])
        })())
    }
}
