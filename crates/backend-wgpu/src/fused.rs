//! Fused kernels: composites this backend runs as one dispatch (`liandan_tensor::fused` has
//! the contract; the conformance suite tests each against its composite). What a kernel here
//! cannot take (f64, which Vulkan cannot exponentiate; buffers beyond one binding or 32-bit
//! offsets) is answered `None`, so the composite runs instead.

use std::sync::Arc;

use liandan_tensor::{DType, FusedOp, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, source};
use crate::repr::Repr;

const LSTM: &str = include_str!("shaders/fused_lstm.wgsl");
const LSTM_CELL: &str = include_str!("shaders/fused_lstm_cell.wgsl");
const LSTM_CELL_BACKWARD: &str = include_str!("shaders/fused_lstm_cell_backward.wgsl");

/// The template of `op`'s kernel over `dtype`, or `None` when this backend has none.
fn template(repr: &Repr, op: &FusedOp, dtype: DType) -> Option<&'static str> {
    let template = match op {
        FusedOp::LstmCell => LSTM_CELL,
        FusedOp::LstmCellBackward => LSTM_CELL_BACKWARD,
        _ => return None,
    };
    (repr.computes(dtype) && dtype != DType::F64).then_some(template)
}

/// The WGSL of a kernel: its template after the helpers it shares.
fn kernel_source(repr: &Repr, template: &str, dtype: DType) -> String {
    source(repr, &format!("{LSTM}{template}"), &[("x", dtype)], &[])
}

/// `(numel of each output, N * H)` of an LSTM-cell op on `inputs`.
fn lstm_outputs(op: &FusedOp, inputs: &[Strided]) -> Option<(Vec<usize>, usize)> {
    let c = inputs.get(1)?.layout.shape();
    let units = c[0] * c[1];
    match op {
        FusedOp::LstmCell => Some((vec![2 * units], units)),
        FusedOp::LstmCellBackward => Some((vec![4 * units, units], units)),
        _ => None,
    }
}

impl WgpuBackend {
    /// Runs `op` as one dispatch, or `None` (see the module docs).
    pub(crate) fn fused_op(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        if !op.updates().is_empty() {
            return self.fused_update(op, inputs);
        }
        if matches!(op, FusedOp::Gelu | FusedOp::GeluBackward) {
            return self.fused_pointwise(op, inputs);
        }
        let dtype = inputs.first()?.dtype;
        let (outputs, units) = lstm_outputs(op, inputs)?;
        let template = template(&self.repr, op, dtype)?;
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        let fits = |numel: usize| self.repr.buffer_bytes(dtype, numel) <= limit && u32::try_from(numel).is_ok();
        if !outputs.iter().all(|&n| fits(n)) || inputs.iter().any(|v| gpu_storage(v).buffer().size() > limit || !v.layout.is_contiguous()) {
            return None;
        }
        let mut meta = vec![units as u32, inputs[1].layout.shape()[1] as u32];
        for v in inputs {
            meta.push(u32::try_from(v.layout.offset()).ok()?);
        }
        Some((|| {
            let kernel = gpu.kernel(&format!("fused {} {dtype}", op.name()), &[], || kernel_source(&self.repr, template, dtype))?;
            let outs = outputs.iter().map(|&n| self.output(dtype, n)).collect::<Result<Vec<_>>>()?;
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.extend(outs.iter().map(|o| o.buffer()));
            gpu.dispatch(&kernel, &meta, &buffers, grid(units))?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}

/// Every fused kernel this device could build, for validation tests.
pub(crate) fn sources(repr: &Repr) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for op in [FusedOp::LstmCell, FusedOp::LstmCellBackward] {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            out.extend(template(repr, &op, dtype).map(|t| (format!("fused {} {dtype}", op.name()), kernel_source(repr, t, dtype))));
        }
    }
    out
}
