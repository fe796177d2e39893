//! Fused softmax and log-softmax along the last axis (`liandan_tensor::ops::SoftmaxLastDim`,
//! `LogSoftmaxLastDim` and their gradients): a dispatch each way, a workgroup a row, where the
//! composite takes some ten kernels forward (the maximum, its guard, the shifted exponentials,
//! their sum, its log) and four backward. A classifier's cross-entropy is mostly the
//! log-softmax, and attention's probabilities are the softmax. Computed in f32 whatever the
//! dtype; f64 is left to the composite.
//!
//! The loss after the log-softmax, `NllLoss` summed or averaged, and its gradient are a
//! dispatch each too (f32 only, as autocast leaves a loss): a workgroup sums the rows' picked
//! values, and the gradient is written whole, where the composite gathers, negates, sums and
//! divides, and backward fills, scatters, negates and divides.

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl, WG};
use crate::params::words;
use crate::repr::Repr;

const SHARED: &str = include_str!("shaders/fused_log_softmax.wgsl");
const FORWARD: &str = include_str!("shaders/fused_log_softmax_forward.wgsl");
const BACKWARD: &str = include_str!("shaders/fused_log_softmax_backward.wgsl");
const NLL: &str = include_str!("shaders/fused_nll_loss.wgsl");
const NLL_BACKWARD: &str = include_str!("shaders/fused_nll_loss_backward.wgsl");

/// One fused kernel variant (see `kernels::KernelKey`): the log-softmax's, or with `softmax`
/// the softmax's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    softmax: bool,
    backward: bool,
    dtype: DType,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let main = if self.backward { BACKWARD } else { FORWARD };
        Wgsl::new(repr).params::<LogSoftmaxParams>().ty("x", self.dtype).flag("SOFTMAX", self.softmax).part(SHARED).part(main).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let modes = [(false, false), (false, true), (true, false), (true, true)];
        let keys = modes.into_iter().flat_map(|(softmax, backward)| DType::ALL.map(move |dtype| Key { softmax, backward, dtype }));
        keys.filter(|k| repr.computes(k.dtype) && k.dtype != DType::F64).collect()
    }
}

crate::shader_params! {
    /// A fused (log-)softmax's block (`shaders/fused_log_softmax.wgsl`): `rows` rows of `width`
    /// elements; the inputs' offsets in binding order.
    struct LogSoftmaxParams {
        rows: u32,
        width: u32,
        offsets: [u32; 2],
    }
}

impl WgpuBackend {
    /// Runs a fused log-softmax pass, or with `softmax` a softmax pass, or `None` (f64; a
    /// non-contiguous operand; nothing to compute; buffers beyond one binding or 32-bit
    /// offsets).
    pub(crate) fn fused_log_softmax(&self, softmax: bool, backward: bool, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let x = inputs.first()?;
        let (dtype, numel) = (x.dtype, x.layout.numel());
        let width = x.layout.shape().last().copied().unwrap_or(1);
        let arity = if backward { 2 } else { 1 };
        if inputs.len() != arity || !self.repr.computes(dtype) || dtype == DType::F64 || numel == 0 || inputs.iter().any(|v| !v.layout.is_contiguous()) {
            return None;
        }
        let gpu = match self.fused_gpu(dtype, &[numel], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let rows = numel / width;
        let mut block = LogSoftmaxParams { rows: u32::try_from(rows).ok()?, width: u32::try_from(width).ok()?, offsets: [0; 2] };
        for (offset, v) in block.offsets.iter_mut().zip(inputs) {
            *offset = u32::try_from(v.layout.offset()).ok()?;
        }
        Some((|| {
            let kernel = gpu.kernel(Key { softmax, backward, dtype })?;
            let out = self.output(dtype, numel)?;
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.push(out.buffer());
            // A workgroup a row (two-dimensional past a grid dimension's limit).
            gpu.dispatch(&kernel, &words(&block), &buffers, grid(rows * WG))?;
            Ok(vec![Arc::new(out) as Storage])
        })())
    }
}

/// The kernel of `NllLoss` (`backward`: of `NllLossBackward`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NllKey {
    backward: bool,
}

impl KernelKey for NllKey {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<NllParams>();
        match self.backward {
            true => w.part(NLL_BACKWARD).build(),
            false => w.part(SHARED).part(NLL).build(),
        }
    }

    fn all(_repr: &Repr) -> Vec<NllKey> {
        vec![NllKey { backward: false }, NllKey { backward: true }]
    }
}

crate::shader_params! {
    /// The block of `shaders/fused_nll_loss.wgsl` and its gradient's: `rows` = N, `classes` = C,
    /// the offsets of logp (or g) and of the targets, `mean` (1: divide by N) and the tag an
    /// out-of-range target is reported under.
    struct NllParams {
        rows: u32,
        classes: u32,
        offsets: [u32; 2],
        mean: u32,
        tag: u32,
    }
}

impl WgpuBackend {
    /// Runs `NllLoss` (`backward`: `NllLossBackward` over `classes` columns) as one dispatch, or
    /// `None` (not f32; a non-contiguous operand; no rows; sizes past 32 bits).
    pub(crate) fn fused_nll(&self, backward: bool, mean: bool, classes: usize, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [x, targets] = inputs else { return None };
        if x.dtype != DType::F32 || targets.dtype != DType::I64 || !x.layout.is_contiguous() || !targets.layout.is_contiguous() {
            return None;
        }
        let rows = *targets.layout.shape().first()?;
        let classes = if backward { classes } else { *x.layout.shape().get(1)? };
        let out_numel = if backward { rows * classes } else { 1 };
        if rows == 0 || classes == 0 {
            return None;
        }
        let gpu = match self.fused_gpu(DType::F32, &[out_numel], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let offsets = [u32::try_from(x.layout.offset()).ok()?, u32::try_from(targets.layout.offset()).ok()?];
        let mut block = NllParams { rows: u32::try_from(rows).ok()?, classes: u32::try_from(classes).ok()?, offsets, mean: mean as u32, tag: 0 };
        Some((|| {
            let kernel = gpu.kernel(NllKey { backward })?;
            let out = self.output(DType::F32, out_numel)?;
            let (x, targets) = (gpu_storage(x).buffer(), gpu_storage(targets).buffer());
            if backward {
                gpu.dispatch(&kernel, &words(&block), &[x, targets, out.buffer()], grid(out_numel))?;
            } else {
                block.tag = gpu.index_tag("gather");
                let fault = gpu.index_fault_buffer();
                gpu.dispatch(&kernel, &words(&block), &[x, targets, out.buffer(), &fault], (1, 1, 1))?;
            }
            Ok(vec![Arc::new(out) as Storage])
        })())
    }
}
