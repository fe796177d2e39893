//! Fused kernels: the tensor crate's custom ops (`liandan_tensor::ops`) this backend runs as
//! one dispatch or a few (`liandan_tensor::custom` has the contract; the conformance suite
//! tests each against its composite), known by type ([`Known`]). What a kernel here cannot take
//! (f64, which Vulkan cannot exponentiate; buffers beyond one binding or 32-bit offsets) is
//! answered `None`, so the composite runs instead. This file dispatches, and runs the LSTM and
//! GRU cells.

use std::sync::Arc;

use crate::fused_layer_norm::Op as LayerNormOp;
use liandan_tensor::backend::Window2d;
use liandan_tensor::ops::{
    AddLayerNorm, AddRelu, AddWide, Attention, AttentionBackward, AttentionBackwardJoined, BatchNormBackward, BatchNormTrain, BceLoss, BceLossBackward,
    CastAll, Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBackwardWeightWide, Conv2dBias, Conv2dBiasRelu, Gelu, GeluBackward, GruCell,
    GruCellBackward, LayerNorm, LayerNormBackward, LayerNormBackwardInto, LayerNormLow, LinearGelu, LinearGrads, LogSoftmaxLastDim, LogSoftmaxLastDimBackward,
    LstmCell, LstmCellBackward, LstmStep, MatmulBias, MatmulGeluBackward, MatmulWide, MaxPool2dBackward, NllLoss, NllLossBackward, Relu, ReluBackward,
    SoftmaxLastDim, SoftmaxLastDimBackward, SumChannels, SumRowsWide,
};
use liandan_tensor::{BatchNormOptions, ConvGeometry, CustomKernel, DType, LayerNormOptions, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::conv::ConvOp;
use crate::fused_attention::Pass as AttentionPass;
use crate::fused_pointwise::Pointwise;
use crate::gpu::Gpu;
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::params::words;
use crate::repr::Repr;

pub(crate) const RNN: &str = include_str!("shaders/fused_rnn.wgsl");
const LSTM: &str = include_str!("shaders/fused_lstm.wgsl");
const LSTM_CELL: &str = include_str!("shaders/fused_lstm_cell.wgsl");
const LSTM_CELL_BACKWARD: &str = include_str!("shaders/fused_lstm_cell_backward.wgsl");
const LSTM_GRADS: &str = include_str!("shaders/fused_lstm_grads.wgsl");
const LSTM_CELL_PACKED: &str = include_str!("shaders/packed/lstm_cell.wgsl");
const LSTM_CELL_BACKWARD_PACKED: &str = include_str!("shaders/packed/lstm_cell_backward.wgsl");
const GRU: &str = include_str!("shaders/fused_gru.wgsl");
const GRU_CELL: &str = include_str!("shaders/fused_gru_cell.wgsl");
const GRU_CELL_BACKWARD: &str = include_str!("shaders/fused_gru_cell_backward.wgsl");

/// One of the tensor crate's ops this backend knows, with its parameters.
pub(crate) enum Known {
    Cell(Kernel),
    Pointwise(Pointwise),
    BatchNorm(BatchNormOptions, bool),
    LayerNorm(LayerNormOptions, crate::fused_layer_norm::Op),
    Conv(ConvOp, ConvGeometry),
    MatmulBias,
    /// A product whose f32 sums are multiplied by GELU's gradient as they are stored.
    MatmulGeluBackward,
    /// A linear layer in f32 whose results and their GELU are both written.
    LinearGelu,
    /// A product of f16 (or packed bf16) matrices written in f32.
    MatmulWide,
    /// A linear layer's weight gradient and its bias's, one product; in f32 where `true`.
    LinearGrads(bool),
    /// An f16 (or packed bf16) sum over rows written in f32.
    SumRowsWide,
    /// A sum over all axes but the channels (the second), in f32 where `true`.
    SumChannels(bool),
    MaxPool2dBackward(Window2d),
    LstmStep,
    /// Log-softmax along the last axis; `true` for its gradient.
    LogSoftmax(bool),
    /// Softmax along the last axis; `true` for its gradient.
    Softmax(bool),
    /// Attention with its scale, forward or one of its gradients.
    Attention(f64, crate::fused_attention::Pass),
    /// Casts of many tensors to one type.
    CastAll(DType),
    /// The negative log-likelihood summed or averaged (`mean`), or its gradient over `classes`.
    Nll {
        backward: bool,
        mean: bool,
        classes: usize,
    },
}

impl Known {
    /// `op` as one of the ops this backend has kernels for, or `None`.
    pub(crate) fn of(op: &dyn CustomKernel) -> Option<Known> {
        let is = |t: std::any::TypeId| (op as &dyn std::any::Any).type_id() == t;
        use std::any::TypeId as T;
        let unit = [
            (T::of::<LstmCell>(), Known::Cell(Kernel::LstmCell)),
            (T::of::<LstmCellBackward>(), Known::Cell(Kernel::LstmCellBackward)),
            (T::of::<GruCell>(), Known::Cell(Kernel::GruCell)),
            (T::of::<GruCellBackward>(), Known::Cell(Kernel::GruCellBackward)),
            (T::of::<Relu>(), Known::Pointwise(Pointwise::Relu)),
            (T::of::<ReluBackward>(), Known::Pointwise(Pointwise::ReluBackward)),
            (T::of::<AddRelu>(), Known::Pointwise(Pointwise::AddRelu)),
            (T::of::<AddWide>(), Known::Pointwise(Pointwise::AddWide)),
            (T::of::<Gelu>(), Known::Pointwise(Pointwise::Gelu)),
            (T::of::<GeluBackward>(), Known::Pointwise(Pointwise::GeluBackward)),
            (T::of::<BceLoss>(), Known::Pointwise(Pointwise::BceLoss)),
            (T::of::<BceLossBackward>(), Known::Pointwise(Pointwise::BceLossBackward)),
            (T::of::<MatmulBias>(), Known::MatmulBias),
            (T::of::<MatmulWide>(), Known::MatmulWide),
            (T::of::<MatmulGeluBackward>(), Known::MatmulGeluBackward),
            (T::of::<LinearGelu>(), Known::LinearGelu),
            (T::of::<SumRowsWide>(), Known::SumRowsWide),
            (T::of::<LstmStep>(), Known::LstmStep),
            (T::of::<LogSoftmaxLastDim>(), Known::LogSoftmax(false)),
            (T::of::<LogSoftmaxLastDimBackward>(), Known::LogSoftmax(true)),
            (T::of::<SoftmaxLastDim>(), Known::Softmax(false)),
            (T::of::<SoftmaxLastDimBackward>(), Known::Softmax(true)),
        ];
        if let Some((_, known)) = unit.into_iter().find(|(t, _)| is(*t)) {
            return Some(known);
        }
        let param = [
            op.downcast_ref::<BatchNormTrain>().map(|o| Known::BatchNorm(o.0, false)),
            op.downcast_ref::<BatchNormBackward>().map(|o| Known::BatchNorm(o.0, true)),
            op.downcast_ref::<LayerNorm>().map(|o| Known::LayerNorm(o.0, LayerNormOp::Forward(None))),
            op.downcast_ref::<LayerNormLow>().map(|o| Known::LayerNorm(o.options, LayerNormOp::Forward(Some(o.low)))),
            op.downcast_ref::<AddLayerNorm>().map(|o| Known::LayerNorm(o.options, LayerNormOp::ForwardAdd(o.low))),
            op.downcast_ref::<LayerNormBackward>().map(|o| Known::LayerNorm(o.0, LayerNormOp::Backward)),
            op.downcast_ref::<LayerNormBackwardInto>().map(|o| Known::LayerNorm(o.options, LayerNormOp::BackwardInto(o.low))),
            op.downcast_ref::<Conv2d>().map(|o| Known::Conv(ConvOp::Forward, o.0)),
            op.downcast_ref::<Conv2dBias>().map(|o| Known::Conv(ConvOp::Bias, o.0)),
            op.downcast_ref::<Conv2dBiasRelu>().map(|o| Known::Conv(ConvOp::BiasRelu, o.0)),
            op.downcast_ref::<Conv2dBackwardInput>().map(|o| Known::Conv(ConvOp::Input, o.0)),
            op.downcast_ref::<Conv2dBackwardWeight>().map(|o| Known::Conv(ConvOp::Weight, o.0)),
            op.downcast_ref::<Conv2dBackwardWeightWide>().map(|o| Known::Conv(ConvOp::WeightWide, o.0)),
            op.downcast_ref::<MaxPool2dBackward>().map(|o| Known::MaxPool2dBackward(o.0)),
            op.downcast_ref::<SumChannels>().map(|o| Known::SumChannels(o.wide)),
            op.downcast_ref::<LinearGrads>().map(|o| Known::LinearGrads(o.wide)),
            op.downcast_ref::<Attention>().map(|o| Known::Attention(o.scale, AttentionPass::Forward)),
            op.downcast_ref::<AttentionBackward>().map(|o| Known::Attention(o.scale, AttentionPass::Backward)),
            op.downcast_ref::<AttentionBackwardJoined>().map(|o| Known::Attention(o.scale, AttentionPass::Joined)),
            op.downcast_ref::<CastAll>().map(|o| Known::CastAll(o.0)),
            op.downcast_ref::<NllLoss>().map(|o| Known::Nll { backward: false, mean: o.mean, classes: 0 }),
            op.downcast_ref::<NllLossBackward>().map(|o| Known::Nll { backward: true, mean: o.mean, classes: o.classes }),
        ];
        param.into_iter().flatten().next()
    }

    /// Whether its kernel reads the packed bf16 `inputs` as they are (all of them packed): the
    /// convolutions, ReLU, GELU and their gradients, a linear layer with its bias, the products
    /// and row sums written in f32, a channel sum into f32 where each run is whole words, the LSTM's step and, where H is even, its cell and the
    /// cell's backward; batch norm's packed activations beside f32 statistics where L is even.
    pub(crate) fn reads_packed(&self, inputs: &[Strided]) -> bool {
        let known = match self {
            Known::Conv(..) => true,
            Known::Pointwise(p) => p.reads_packed(),
            Known::MatmulBias | Known::MatmulWide | Known::SumRowsWide | Known::LstmStep => true,
            // f32 only: bf16 is declined as stored rather than widened first.
            Known::MatmulGeluBackward | Known::LinearGelu => true,
            // bf16 is declined as stored (the engine then takes the product and the sum apart),
            // rather than widened first for nothing.
            Known::LinearGrads(_) => true,
            // Into f32, a word of one channel's run at a time.
            Known::SumChannels(wide) => {
                return *wide
                    && inputs.len() == 1
                    && crate::packed::packed_view(&inputs[0])
                    && inputs[0].layout.is_contiguous()
                    && inputs[0].layout.shape().get(2..).is_some_and(|l| l.iter().product::<usize>().is_multiple_of(2))
            }
            Known::Attention(..) => return crate::fused_attention::reads_packed(inputs),
            // A residual add's packed bf16 addend beside f32 x and parameters.
            Known::LayerNorm(_, crate::fused_layer_norm::Op::ForwardAdd(_)) => {
                return inputs.split_last().is_some_and(|(b, rest)| crate::packed::packed_view(b) && !rest.iter().any(crate::packed::packed_view))
            }
            // dy packed beside the i64 indices.
            Known::MaxPool2dBackward(_) => return inputs.first().is_some_and(crate::packed::packed_view) && inputs.iter().all(|v| v.layout.is_contiguous()),
            // Packed activations beside f32 statistics: not all packed.
            Known::BatchNorm(o, backward) => return crate::fused_norm::reads_packed(o, *backward, inputs),
            // A word holds two units of one row.
            Known::Cell(kernel @ (Kernel::LstmCell | Kernel::LstmCellBackward)) => cell_outputs(*kernel, inputs).is_some_and(|(_, _, h)| h % 2 == 0),
            _ => false,
        };
        known && crate::packed::all_packed(inputs)
    }
}

/// A fused kernel of the recurrent cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kernel {
    LstmCell,
    LstmCellBackward,
    GruCell,
    GruCellBackward,
}

const KERNELS: [Kernel; 4] = [Kernel::LstmCell, Kernel::LstmCellBackward, Kernel::GruCell, Kernel::GruCellBackward];

/// One fused kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    kernel: Kernel,
    dtype: DType,
    /// Whether the gates come in two terms (`lstm_cell_sum`) that the kernel adds.
    sum: bool,
    /// Whether the operands and results are packed bf16, two units an invocation (the LSTM's).
    packed: bool,
}

impl Key {
    /// The kernel running `kernel` over `dtype` with `inputs` operands, or `None` when this
    /// backend has none.
    fn of(repr: &Repr, kernel: Kernel, dtype: DType, inputs: usize, packed: bool) -> Option<Key> {
        let sum = match kernel {
            Kernel::LstmCell => inputs == 3,
            Kernel::LstmCellBackward => inputs == 6,
            Kernel::GruCell | Kernel::GruCellBackward => false,
        };
        let key = Key { kernel, dtype, sum, packed };
        key.supported(repr).then_some(key)
    }

    fn supported(&self, repr: &Repr) -> bool {
        let lstm = matches!(self.kernel, Kernel::LstmCell | Kernel::LstmCellBackward);
        repr.computes(self.dtype) && self.dtype != DType::F64 && (lstm || !self.sum) && (!self.packed || (lstm && self.dtype == DType::BF16))
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        // The LSTM's input number of the second gate term: after every other input.
        let wgsl = Wgsl::new(repr).params::<CellParams>().ty("x", self.dtype).part(RNN);
        let (more, kernel) = match (self.kernel, self.packed) {
            (Kernel::LstmCell, false) => (2, LSTM_CELL),
            (Kernel::LstmCell, true) => (2, LSTM_CELL_PACKED),
            (Kernel::LstmCellBackward, false) => (5, LSTM_CELL_BACKWARD),
            (Kernel::LstmCellBackward, true) => (5, LSTM_CELL_BACKWARD_PACKED),
            (Kernel::GruCell, _) => return wgsl.part(GRU).part(GRU_CELL).build(),
            (Kernel::GruCellBackward, _) => return wgsl.part(GRU).part(GRU_CELL_BACKWARD).build(),
        };
        let wgsl = if self.packed { crate::packed::with_words(wgsl) } else { wgsl };
        let wgsl = wgsl.flag("SUM", self.sum).uint("MORE", more).part(LSTM);
        let wgsl = if self.kernel == Kernel::LstmCellBackward { wgsl.part(LSTM_GRADS) } else { wgsl };
        wgsl.part(kernel).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let keys = KERNELS.into_iter().flat_map(|kernel| {
            DType::ALL
                .into_iter()
                .flat_map(move |dtype| [(false, false), (true, false), (false, true), (true, true)].map(|(sum, packed)| Key { kernel, dtype, sum, packed }))
        });
        keys.filter(|k| k.supported(repr)).collect()
    }
}

crate::shader_params! {
    /// An LSTM or GRU cell's block (`shaders/fused_lstm.wgsl`, `fused_gru.wgsl`): `units` =
    /// N * H invocations, `h` = H, each input's element offset in binding order.
    struct CellParams {
        units: u32,
        h: u32,
        offsets: [u32; 8],
    }
}

/// `(numel of each output, N * H, H)` of an LSTM- or GRU-cell kernel on `inputs`.
fn cell_outputs(kernel: Kernel, inputs: &[Strided]) -> Option<(Vec<usize>, usize, usize)> {
    // The state operand, [N, H]: the LSTM's c, the GRU's h.
    let state = match kernel {
        Kernel::LstmCell | Kernel::LstmCellBackward => inputs.get(1)?,
        Kernel::GruCell | Kernel::GruCellBackward => inputs.get(2)?,
    };
    let &[n, h] = state.layout.shape() else { return None };
    let units = n * h;
    let outputs = match kernel {
        Kernel::LstmCell => vec![2 * units],
        Kernel::LstmCellBackward => vec![4 * units, units],
        Kernel::GruCell => vec![units],
        Kernel::GruCellBackward => vec![3 * units, 3 * units, units],
    };
    Some((outputs, units, h))
}

impl WgpuBackend {
    /// The kernel of `op` where it is one of the tensor crate's ops this backend knows (the
    /// outer `None` where it is not): the kernel's outputs, or `None` where the composite runs.
    pub(crate) fn tensor_op_kernel(&self, op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Option<Result<Vec<Storage>>>> {
        let known = Known::of(op)?;
        // Some kernels read packed bf16 operands as they are (all of them packed); the others
        // take widened copies.
        let as_they_are = known.reads_packed(inputs);
        Some(self.staged_fused(as_they_are, inputs, |v| self.fused_op(&known, v)))
    }

    /// Runs `op` as one dispatch (or a few), or `None` (see the module docs).
    pub(crate) fn fused_op(&self, op: &Known, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        match *op {
            Known::Cell(kernel) => self.fused_cell(kernel, inputs),
            Known::Pointwise(p) => self.fused_pointwise(p, inputs),
            Known::BatchNorm(o, backward) => self.fused_batch_norm(&o, backward, inputs),
            Known::CastAll(to) => self.fused_cast_all(to, inputs),
            Known::LayerNorm(o, op) => self.fused_layer_norm(&o, op, inputs),
            Known::Conv(op, g) => self.fused_conv(op, g, inputs),
            Known::MatmulBias => self.fused_matmul_bias(inputs),
            Known::MatmulWide => self.fused_matmul_wide(inputs),
            Known::MatmulGeluBackward => self.fused_matmul_gelu_backward(inputs),
            Known::LinearGelu => self.fused_linear_gelu(inputs),
            Known::LinearGrads(wide) => self.fused_linear_grads(wide, inputs),
            Known::SumRowsWide => self.fused_sum_rows_wide(inputs),
            Known::SumChannels(wide) => self.fused_sum_channels(wide, inputs),
            Known::MaxPool2dBackward(w) => match inputs {
                [dy, indices] => self.max_pool2d_backward_op(*dy, *indices, &w).map(|r| r.map(|dx| vec![dx])),
                _ => None,
            },
            Known::LstmStep => self.fused_lstm_step(inputs),
            Known::LogSoftmax(backward) => self.fused_log_softmax(false, backward, inputs),
            Known::Softmax(backward) => self.fused_log_softmax(true, backward, inputs),
            Known::Attention(scale, pass) => self.fused_attention(scale, pass, inputs),
            Known::Nll { backward, mean, classes } => self.fused_nll(backward, mean, classes, inputs),
        }
    }

    /// Runs an LSTM- or GRU-cell kernel as one dispatch, or `None`.
    fn fused_cell(&self, kernel: Kernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let dtype = inputs.first()?.dtype;
        let (outputs, units, h) = cell_outputs(kernel, inputs)?;
        // Packed operands are read as they are by the kernels that write two units a word.
        let packed = crate::packed::all_packed(inputs);
        let key = Key::of(&self.repr, kernel, dtype, inputs.len(), packed)?;
        if inputs.iter().any(|v| !v.layout.is_contiguous()) || (packed && h % 2 != 0) {
            return None;
        }
        let gpu = match self.fused_gpu(dtype, &outputs, inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let mut block = CellParams { units: u32::try_from(units).ok()?, h: h as u32, offsets: [0; 8] };
        // One more slot for an LSTM's absent second gate term (below).
        if inputs.len() >= block.offsets.len() {
            return None;
        }
        for (offset, v) in block.offsets.iter_mut().zip(inputs) {
            *offset = u32::try_from(v.layout.offset()).ok()?;
        }
        Some((|| {
            let kernel = gpu.kernel(key)?;
            let outs = match packed {
                true => outputs.iter().map(|&n| self.packed_output(n)).collect::<Result<Vec<_>>>()?,
                false => outputs.iter().map(|&n| self.output(dtype, n)).collect::<Result<Vec<_>>>()?,
            };
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            if matches!(key.kernel, Kernel::LstmCell | Kernel::LstmCellBackward) && !key.sum {
                // The kernel binds a second gate term either way; without one it is the
                // gates again, never read.
                buffers.push(gpu_storage(&inputs[0]).buffer());
            }
            buffers.extend(outs.iter().map(|o| o.buffer()));
            let invocations = if packed { units / 2 } else { units };
            gpu.dispatch(&kernel, &words(&block), &buffers, grid(invocations))?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}

impl WgpuBackend {
    /// The device for a fused op whose outputs (`numel` elements of `dtype` each) and inputs
    /// each fit one storage binding with 32-bit element offsets: `None` where they do not (the
    /// composite runs instead), `Some(Err)` where the device is gone.
    pub(crate) fn fused_gpu(&self, dtype: DType, outputs: &[usize], inputs: &[Strided]) -> Option<Result<&Arc<Gpu>>> {
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        let fits = |numel: usize| u32::try_from(numel).is_ok() && self.repr.buffer_bytes(dtype, numel) <= limit;
        if !outputs.iter().all(|&n| fits(n)) || inputs.iter().any(|v| gpu_storage(v).buffer().size() > limit) {
            return None;
        }
        Some(Ok(gpu))
    }
}
