//! Fused optimizer updates ([`FusedOp::AdamStep`], [`FusedOp::SgdStep`]): one dispatch per
//! parameter tensor, reading the parameter, its gradient and its state once and writing their
//! new values to fresh buffers (the update contract of `liandan_tensor::fused`). One pipeline
//! per dtype and option set (amsgrad, momentum); everything that varies per step (lr, bias
//! corrections) rides in the dispatch's parameter block.

use std::sync::Arc;

use liandan_tensor::{AdamStep, DType, FusedOp, Result, SgdStep, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::repr::Repr;

const HELPERS: &str = include_str!("shaders/fused_optim.wgsl");
const ADAM: &str = include_str!("shaders/fused_adam_step.wgsl");
const ADAM_AMSGRAD: &str = include_str!("shaders/fused_adam_amsgrad.wgsl");
const ADAM_PLAIN: &str = include_str!("shaders/fused_adam_plain.wgsl");
const SGD: &str = include_str!("shaders/fused_sgd_step.wgsl");
const SGD_MOMENTUM: &str = include_str!("shaders/fused_sgd_momentum.wgsl");
const SGD_PLAIN: &str = include_str!("shaders/fused_sgd_plain.wgsl");

/// One fused update kernel variant (see `kernels::KernelKey`): Adam or SGD, with or without
/// its optional state (`stateful`: amsgrad for Adam, momentum for SGD), over `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    adam: bool,
    stateful: bool,
    dtype: DType,
}

impl KernelKey for Key {
    /// The helpers, the step, and the part that the option set picks.
    fn source(&self, repr: &Repr) -> String {
        let (main, part) = match (self.adam, self.stateful) {
            (true, true) => (ADAM, ADAM_AMSGRAD),
            (true, false) => (ADAM, ADAM_PLAIN),
            (false, true) => (SGD, SGD_MOMENTUM),
            (false, false) => (SGD, SGD_PLAIN),
        };
        Wgsl::new(repr).ty("x", self.dtype).part(HELPERS).part(main).part(part).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let options = [(true, false), (true, true), (false, false), (false, true)];
        let keys = options.into_iter().flat_map(|(adam, stateful)| DType::ALL.map(|dtype| Key { adam, stateful, dtype }));
        keys.filter(|k| repr.computes(k.dtype) && k.dtype != DType::F64).collect()
    }
}

/// f32 bits of a hyper-parameter, for the parameter block.
fn bits(x: f64) -> u32 {
    (x as f32).to_bits()
}

/// Flag words from `(bit, on)` pairs.
fn flags(pairs: &[(u32, bool)]) -> u32 {
    pairs.iter().filter(|p| p.1).map(|p| p.0).sum()
}

/// `(flags, hyper-parameter words, stateful)` of an Adam step; see `fused_adam_step.wgsl`.
fn adam_meta(a: &AdamStep) -> (u32, Vec<u32>, bool) {
    let (step_size, bias_correction2_sqrt) = a.corrections();
    let f = flags(&[(1, a.maximize), (2, a.weight_decay != 0.0), (4, a.decoupled_weight_decay), (8, (1.0 - a.beta1).abs() < 0.5)]);
    let w = 1.0 - a.beta1;
    let hyper = [a.weight_decay, 1.0 - a.lr * a.weight_decay, w, 1.0 - w, a.beta2, 1.0 - a.beta2, bias_correction2_sqrt, a.eps, -step_size];
    (f, hyper.map(bits).to_vec(), a.amsgrad)
}

/// `(flags, hyper-parameter words, stateful)` of an SGD step; see `fused_sgd_step.wgsl`.
fn sgd_meta(s: &SgdStep) -> (u32, Vec<u32>, bool) {
    let f = flags(&[(1, s.maximize), (2, s.weight_decay != 0.0), (4, s.first), (8, s.nesterov), (16, s.dampening != 0.0)]);
    (f, [s.weight_decay, s.momentum, 1.0 - s.dampening, s.lr].map(bits).to_vec(), s.momentum != 0.0)
}

impl WgpuBackend {
    /// Runs an update op as one dispatch, or `None` where this backend leaves it to the
    /// composite (f64, which the composite runs at full precision; buffers beyond one binding).
    pub(crate) fn fused_update(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let (adam, (flag_word, hyper, stateful)) = match op {
            FusedOp::AdamStep(a) => (true, adam_meta(a)),
            FusedOp::SgdStep(s) => (false, sgd_meta(s)),
            _ => return None,
        };
        let first = inputs.first()?;
        let (dtype, numel) = (first.dtype, first.layout.numel());
        if !self.repr.computes(dtype) || dtype == DType::F64 || inputs.len() != if adam { 4 } else { 2 } + stateful as usize {
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
        // Offsets of every input slot the kernel names (an absent optional one reads as 0).
        let slots = if adam { 5 } else { 3 };
        let mut meta = vec![numel as u32, flag_word];
        for k in 0..slots {
            meta.push(inputs.get(k).map_or(Some(0), |v| u32::try_from(v.layout.offset()).ok())?);
        }
        meta.extend(hyper);
        Some((|| {
            let kernel = gpu.kernel(Key { adam, stateful, dtype })?;
            let outs = (0..op.outputs()).map(|_| self.output(dtype, numel)).collect::<Result<Vec<_>>>()?;
            // Bindings: the always-present inputs, their outputs, then the optional state's
            // input and output (so the option's WGSL part can add its two bindings last).
            let fixed = if adam { 4 } else { 2 };
            let mut buffers: Vec<&wgpu::Buffer> = inputs[..fixed].iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.extend(outs[..op.outputs() - stateful as usize].iter().map(|o| o.buffer()));
            if stateful {
                buffers.push(gpu_storage(&inputs[fixed]).buffer());
                buffers.push(outs[op.outputs() - 1].buffer());
            }
            gpu.dispatch(&kernel, &meta, &buffers, grid(numel))?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
