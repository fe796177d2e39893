//! Fused kernels: composites this backend runs as one dispatch (`liandan_tensor::fused` has
//! the contract; the conformance suite tests each against its composite). What a kernel here
//! cannot take (f64, which Vulkan cannot exponentiate; buffers beyond one binding or 32-bit
//! offsets) is answered `None`, so the composite runs instead.

use std::sync::Arc;

use liandan_tensor::{DType, FusedOp, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::gpu::Gpu;
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::repr::Repr;

pub(crate) const RNN: &str = include_str!("shaders/fused_rnn.wgsl");
const LSTM: &str = include_str!("shaders/fused_lstm.wgsl");
const LSTM_CELL: &str = include_str!("shaders/fused_lstm_cell.wgsl");
const LSTM_CELL_BACKWARD: &str = include_str!("shaders/fused_lstm_cell_backward.wgsl");
const GRU: &str = include_str!("shaders/fused_gru.wgsl");
const GRU_CELL: &str = include_str!("shaders/fused_gru_cell.wgsl");
const GRU_CELL_BACKWARD: &str = include_str!("shaders/fused_gru_cell_backward.wgsl");

/// A fused kernel: one per `FusedOp` this backend runs.
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
}

impl Key {
    /// The kernel running `op` over `dtype` with `inputs` operands, or `None` when this
    /// backend has none.
    fn of(repr: &Repr, op: &FusedOp, dtype: DType, inputs: usize) -> Option<Key> {
        let (kernel, sum) = match op {
            FusedOp::LstmCell => (Kernel::LstmCell, inputs == 3),
            FusedOp::LstmCellBackward => (Kernel::LstmCellBackward, inputs == 6),
            FusedOp::GruCell => (Kernel::GruCell, false),
            FusedOp::GruCellBackward => (Kernel::GruCellBackward, false),
            _ => return None,
        };
        let key = Key { kernel, dtype, sum };
        key.supported(repr).then_some(key)
    }

    fn supported(&self, repr: &Repr) -> bool {
        let lstm = matches!(self.kernel, Kernel::LstmCell | Kernel::LstmCellBackward);
        repr.computes(self.dtype) && self.dtype != DType::F64 && (lstm || !self.sum)
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        // The LSTM's meta slot of the second gate term's offset: after every other input's.
        let wgsl = Wgsl::new(repr).ty("x", self.dtype).part(RNN);
        let (more, kernel) = match self.kernel {
            Kernel::LstmCell => (4, LSTM_CELL),
            Kernel::LstmCellBackward => (7, LSTM_CELL_BACKWARD),
            Kernel::GruCell => return wgsl.part(GRU).part(GRU_CELL).build(),
            Kernel::GruCellBackward => return wgsl.part(GRU).part(GRU_CELL_BACKWARD).build(),
        };
        wgsl.flag("SUM", self.sum).uint("MORE", more).part(LSTM).part(kernel).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let keys = KERNELS.into_iter().flat_map(|kernel| DType::ALL.into_iter().flat_map(move |dtype| [false, true].map(|sum| Key { kernel, dtype, sum })));
        keys.filter(|k| k.supported(repr)).collect()
    }
}

/// `(numel of each output, N * H, H)` of an LSTM- or GRU-cell op on `inputs`.
fn cell_outputs(op: &FusedOp, inputs: &[Strided]) -> Option<(Vec<usize>, usize, usize)> {
    // The state operand, [N, H]: the LSTM's c, the GRU's h.
    let state = match op {
        FusedOp::LstmCell | FusedOp::LstmCellBackward => inputs.get(1)?,
        FusedOp::GruCell | FusedOp::GruCellBackward => inputs.get(2)?,
        _ => return None,
    };
    let &[n, h] = state.layout.shape() else { return None };
    let units = n * h;
    let outputs = match op {
        FusedOp::LstmCell => vec![2 * units],
        FusedOp::LstmCellBackward => vec![4 * units, units],
        FusedOp::GruCell => vec![units],
        _ => vec![3 * units, 3 * units, units],
    };
    Some((outputs, units, h))
}

impl WgpuBackend {
    /// Runs `op` as one dispatch, or `None` (see the module docs).
    pub(crate) fn fused_op(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        if !op.updates().is_empty() {
            return self.fused_update(op, inputs);
        }
        if matches!(op, FusedOp::Relu | FusedOp::ReluBackward | FusedOp::Gelu | FusedOp::GeluBackward | FusedOp::BceLoss | FusedOp::BceLossBackward) {
            return self.fused_pointwise(op, inputs);
        }
        if matches!(op, FusedOp::BatchNormTrain(_) | FusedOp::BatchNormBackward(_)) {
            return self.fused_batch_norm(op, inputs);
        }
        if matches!(op, FusedOp::LayerNorm(_) | FusedOp::LayerNormBackward(_)) {
            return self.fused_layer_norm(op, inputs);
        }
        if let FusedOp::MatmulBias = op {
            return self.fused_matmul_bias(inputs);
        }
        if let (FusedOp::MaxPool2dBackward(w), [dy, indices]) = (op, inputs) {
            return self.max_pool2d_backward_op(*dy, *indices, w).map(|r| r.map(|dx| vec![dx]));
        }
        if let FusedOp::LstmStep = op {
            return self.fused_lstm_step(inputs);
        }
        if matches!(
            op,
            FusedOp::Conv2d(_) | FusedOp::Conv2dBias(_) | FusedOp::Conv2dBiasRelu(_) | FusedOp::Conv2dBackwardInput(_) | FusedOp::Conv2dBackwardWeight(_)
        ) {
            return self.fused_conv(op, inputs);
        }
        let dtype = inputs.first()?.dtype;
        let (outputs, units, h) = cell_outputs(op, inputs)?;
        let key = Key::of(&self.repr, op, dtype, inputs.len())?;
        if inputs.iter().any(|v| !v.layout.is_contiguous()) {
            return None;
        }
        let gpu = match self.fused_gpu(dtype, &outputs, inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let mut meta = vec![u32::try_from(units).ok()?, h as u32];
        for v in inputs {
            meta.push(u32::try_from(v.layout.offset()).ok()?);
        }
        Some((|| {
            let kernel = gpu.kernel(key)?;
            let outs = outputs.iter().map(|&n| self.output(dtype, n)).collect::<Result<Vec<_>>>()?;
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            if matches!(key.kernel, Kernel::LstmCell | Kernel::LstmCellBackward) && !key.sum {
                // The kernel binds a second gate term either way; without one it is the
                // gates again, never read.
                buffers.push(gpu_storage(&inputs[0]).buffer());
                meta.push(0);
            }
            buffers.extend(outs.iter().map(|o| o.buffer()));
            gpu.dispatch(&kernel, &meta, &buffers, grid(units))?;
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
