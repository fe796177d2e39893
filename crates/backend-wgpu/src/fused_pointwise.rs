//! Fused elementwise composites (GELU and its gradient): one invocation per element of
//! contiguous inputs of one shape, one output of that shape, in one dispatch.

use std::sync::Arc;

use liandan_tensor::{DType, FusedOp, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, source};
use crate::repr::Repr;

const ERF: &str = include_str!("shaders/erf.wgsl");
const GELU: &str = include_str!("shaders/fused_gelu.wgsl");
const GELU_BACKWARD: &str = include_str!("shaders/fused_gelu_backward.wgsl");

/// The template of `op`'s kernel (after the helpers it uses), or `None` for the other ops.
fn template(op: &FusedOp) -> Option<&'static str> {
    match op {
        FusedOp::Gelu => Some(GELU),
        FusedOp::GeluBackward => Some(GELU_BACKWARD),
        _ => None,
    }
}

fn kernel_source(repr: &Repr, template: &str, dtype: DType) -> String {
    source(repr, &format!("{ERF}{template}"), &[("x", dtype)], &[])
}

impl WgpuBackend {
    /// Runs an elementwise fused op as one dispatch, or `None` (f64, which the f32 erf cannot
    /// serve; buffers beyond one binding or 32-bit offsets).
    pub(crate) fn fused_pointwise(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let template = template(op)?;
        let first = inputs.first()?;
        let (dtype, numel) = (first.dtype, first.layout.numel());
        if !self.repr.computes(dtype) || dtype == DType::F64 {
            return None;
        }
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        if u32::try_from(numel).is_err() || self.repr.buffer_bytes(dtype, numel) > limit || inputs.iter().any(|v| gpu_storage(v).buffer().size() > limit) {
            return None;
        }
        let mut meta = vec![numel as u32];
        for v in inputs {
            meta.push(u32::try_from(v.layout.offset()).ok()?);
        }
        Some((|| {
            let kernel = gpu.kernel(&format!("fused {} {dtype}", op.name()), &[], || kernel_source(&self.repr, template, dtype))?;
            let out = self.output(dtype, numel)?;
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.push(out.buffer());
            gpu.dispatch(&kernel, &meta, &buffers, grid(numel))?;
            Ok(vec![Arc::new(out) as Storage])
        })())
    }
}

/// Every elementwise fused kernel this device could build, for validation tests.
pub(crate) fn sources(repr: &Repr) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for op in [FusedOp::Gelu, FusedOp::GeluBackward] {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            out.push((format!("fused {} {dtype}", op.name()), kernel_source(repr, template(&op).expect("an elementwise op"), dtype)));
        }
    }
    out
}
