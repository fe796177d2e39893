//! `torch.optim.Adam` and `torch.optim.AdamW`: one rule, the weight decay coupled (an L2
//! penalty in the gradient) or decoupled (the parameter shrunk before the update); its update
//! as one kernel (`adam_step`: the CPU's below, the GPU's `shaders/adam_step.wgsl`). AdamW,
//! the decoupled rule under a type of its own, is in `adamw.rs`.

use liandan_backend_cpu::kernel::{in_pieces, slices, Float};
use liandan_tensor::{Result as TensorResult, Storage, Strided, Tensor};
use num_traits::Float as _;
use serde::{Deserialize, Serialize};

use super::core::{check_range, decay_addcmul, l2, lerp, non_negative, rule_defaults, signed, Optim, ParamState, Rule};
#[cfg(feature = "wgpu")]
use super::fused::gpu::Update;
use super::fused::{acc, buffers, stored, Kernels, Step};
use crate::error::Result;

/// `torch.optim.Adam`: `Adam::new(params, AdamConfig::adam(1e-3))`.
pub type Adam = Optim<AdamConfig>;

/// The hyper-parameters of Adam and AdamW, named as `torch.optim` names them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    pub maximize: bool,
    /// AdamW when true.
    pub decoupled_weight_decay: bool,
}

impl AdamConfig {
    /// `torch.optim.Adam`'s defaults with learning rate `lr`.
    pub fn adam(lr: f64) -> AdamConfig {
        AdamConfig { lr, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, amsgrad: false, maximize: false, decoupled_weight_decay: false }
    }

    /// `torch.optim.Adam(decoupled_weight_decay=True)`, which computes what AdamW does, with
    /// AdamW's defaults (weight decay 0.01) and learning rate `lr`. The [`AdamW`](super::AdamW) type takes
    /// an [`AdamWConfig`](super::AdamWConfig).
    pub fn adamw(lr: f64) -> AdamConfig {
        AdamConfig { weight_decay: 1e-2, decoupled_weight_decay: true, ..AdamConfig::adam(lr) }
    }
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig::adam(1e-3)
    }
}

impl Rule for AdamConfig {
    const NAME: &'static str = "Adam";

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "betas.0", self.betas.0, 0.0, 1.0, false)?;
        check_range(Self::NAME, "betas.1", self.betas.1, 0.0, 1.0, false)?;
        non_negative(Self::NAME, &[("eps", self.eps)])
    }

    fn momentum(&self) -> Option<f64> {
        Some(self.betas.0)
    }

    fn with_momentum(&self, momentum: f64) -> Self {
        AdamConfig { betas: (momentum, self.betas.1), ..self.clone() }
    }

    fn state_names(&self) -> Vec<&'static str> {
        if self.amsgrad {
            vec!["exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
        } else {
            vec!["exp_avg", "exp_avg_sq"]
        }
    }

    /// The composite of the fused `adam_step`, and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        let (beta1, beta2) = self.betas;
        self.operands(param, state)?;
        let mut g = signed(grad, self.maximize)?;
        let mut p = param.clone();
        if self.decoupled_weight_decay {
            if weight_decay != 0.0 {
                p = p.mul_scalar(1.0 - lr * weight_decay)?;
            }
        } else {
            g = l2(g, param, weight_decay)?;
        }
        let exp_avg = lerp(&state.tensors[0], &g, 1.0 - beta1)?;
        let exp_avg_sq = decay_addcmul(&state.tensors[1], beta2, &g, &g, 1.0 - beta2)?;
        // Bias corrections on the host in f64 from the host step count, as PyTorch's default
        // (non-capturable) path computes them: no read-back.
        let (step_size, bias_correction2_sqrt) = self.corrections(lr, state.step);
        let second = if self.amsgrad {
            let max = state.tensors[2].maximum(&exp_avg_sq)?;
            state.tensors[2] = max.clone();
            max
        } else {
            exp_avg_sq.clone()
        };
        let denom = second.sqrt()?.div_scalar(bias_correction2_sqrt)?.add_scalar(self.eps)?;
        param.assign(&p.add(&exp_avg.div(&denom)?.mul_scalar(-step_size)?)?)?;
        state.tensors[0] = exp_avg;
        state.tensors[1] = exp_avg_sq;
        Ok(())
    }

    rule_defaults!();
}

impl AdamConfig {
    /// `(lr / (1 - beta1^step), sqrt(1 - beta2^step))`: the step size and the second moment's
    /// bias correction, in f64 on the host as PyTorch's default (non-capturable) path has them.
    fn corrections(&self, lr: f64, step: u64) -> (f64, f64) {
        let (beta1, beta2) = self.betas;
        let step = step as f64;
        (lr / (1.0 - beta1.powf(step)), (1.0 - beta2.powf(step)).powf(0.5))
    }
}

impl Kernels for AdamConfig {
    const OP: &'static str = "adam_step";

    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)> {
        if state.tensors.is_empty() {
            state.tensors = self.state_names().iter().map(|_| param.zeros_like()).collect::<TensorResult<_>>()?;
        }
        Ok((state.tensors.clone(), false))
    }

    /// param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq] to their new param, exp_avg,
    /// exp_avg_sq[, max_exp_avg_sq], in the composite's order of operations.
    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>> {
        let AdamConfig { betas: (beta1, beta2), eps, amsgrad, maximize, decoupled_weight_decay, .. } = step.rule;
        let weight_decay = step.weight_decay;
        let v = slices::<T>(Self::OP, inputs)?;
        let n = v[0].len();
        let (step_size, bias_correction2_sqrt) = step.rule.corrections(step.lr, step.step);
        let c = Coefficients::<T::Wide> {
            sign: acc(if maximize { -1.0 } else { 1.0 }),
            wd: acc(weight_decay),
            shrink: acc(1.0 - step.lr * weight_decay),
            // The composite's lerp weight and its complement, both from f64 as it computes them.
            w1: acc(1.0 - beta1),
            w1_rest: acc(1.0 - (1.0 - beta1)),
            b2: acc(beta2),
            b2_rest: acc(1.0 - beta2),
            bc2: acc(bias_correction2_sqrt),
            eps: acc(eps),
            neg_step: acc(-step_size),
        };
        let low_weight = (1.0 - beta1).abs() < 0.5;
        let decay = match (weight_decay != 0.0, decoupled_weight_decay) {
            (false, _) => NO_DECAY,
            (true, false) => L2_DECAY,
            (true, true) => DECOUPLED_DECAY,
        };
        // Outputs written in place and every operand cut to `n` up front, and the flags made
        // constants of the loop's copy: the loop then has no capacity or bounds checks and no
        // branches, so it vectorizes (pushing into four vectors, or testing the flags per
        // element, kept it scalar).
        let (ins, mut outs) = buffers(&v, 3 + amsgrad as usize, n)?;
        in_pieces(&ins, &mut outs, move |ins, outs| match (low_weight, decay, amsgrad) {
            (true, NO_DECAY, false) => adam_elements::<T, true, NO_DECAY, false>(&c, ins, outs),
            (true, L2_DECAY, false) => adam_elements::<T, true, L2_DECAY, false>(&c, ins, outs),
            (true, _, false) => adam_elements::<T, true, DECOUPLED_DECAY, false>(&c, ins, outs),
            (false, NO_DECAY, false) => adam_elements::<T, false, NO_DECAY, false>(&c, ins, outs),
            (false, L2_DECAY, false) => adam_elements::<T, false, L2_DECAY, false>(&c, ins, outs),
            (false, _, false) => adam_elements::<T, false, DECOUPLED_DECAY, false>(&c, ins, outs),
            (true, NO_DECAY, true) => adam_elements::<T, true, NO_DECAY, true>(&c, ins, outs),
            (true, L2_DECAY, true) => adam_elements::<T, true, L2_DECAY, true>(&c, ins, outs),
            (true, _, true) => adam_elements::<T, true, DECOUPLED_DECAY, true>(&c, ins, outs),
            (false, NO_DECAY, true) => adam_elements::<T, false, NO_DECAY, true>(&c, ins, outs),
            (false, L2_DECAY, true) => adam_elements::<T, false, L2_DECAY, true>(&c, ins, outs),
            (false, _, true) => adam_elements::<T, false, DECOUPLED_DECAY, true>(&c, ins, outs),
        });
        Ok(stored(outs))
    }

    #[cfg(feature = "wgpu")]
    type Params = AdamParams;

    /// The GPU kernel: `shaders/adam_step.wgsl`, with `adam_amsgrad.wgsl` or `adam_plain.wgsl`.
    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> Update<AdamParams> {
        let a = &step.rule;
        let (step_size, bias_correction2_sqrt) = a.corrections(step.lr, step.step);
        let wd = step.weight_decay;
        let bit = |b: u32, on: bool| if on { b } else { 0 };
        let flags = bit(1, a.maximize) | bit(2, wd != 0.0) | bit(4, a.decoupled_weight_decay) | bit(8, (1.0 - a.betas.0).abs() < 0.5);
        let (w1, beta2) = (1.0 - a.betas.0, a.betas.1);
        let hyper = [wd, 1.0 - step.lr * wd, w1, 1.0 - w1, beta2, 1.0 - beta2, bias_correction2_sqrt, a.eps, -step_size].map(|x| x as f32);
        let params = Box::new(move |n, at: &[u32]| AdamParams {
            n,
            flags,
            param_at: at[0],
            grad_at: at[1],
            exp_avg_at: at[2],
            exp_avg_sq_at: at[3],
            max_exp_avg_sq_at: at[4],
            weight_decay: hyper[0],
            shrink: hyper[1],
            w1: hyper[2],
            w1_rest: hyper[3],
            beta2: hyper[4],
            beta2_rest: hyper[5],
            bias_correction2_sqrt: hyper[6],
            eps: hyper[7],
            neg_step_size: hyper[8],
        });
        let second = if a.amsgrad { include_str!("shaders/adam_amsgrad.wgsl") } else { include_str!("shaders/adam_plain.wgsl") };
        let parts = vec![include_str!("shaders/adam_step.wgsl"), second];
        Update { name: "adam_step", fixed: 4, fixed_outputs: 3, stateful: a.amsgrad, centered: false, slots: 5, parts, consts: Vec::new(), params }
    }
}

#[cfg(feature = "wgpu")]
liandan_backend_wgpu::shader_params! {
    /// `adam_step.wgsl`'s parameters: flags (maximize 1, weight decay 2, decoupled 4, lerp
    /// from exp_avg 8), every input's offset, the hyper-parameters as the composite
    /// multiplies by them.
    pub(crate) struct AdamParams {
        n: u32,
        flags: u32,
        param_at: u32,
        grad_at: u32,
        exp_avg_at: u32,
        exp_avg_sq_at: u32,
        max_exp_avg_sq_at: u32,
        weight_decay: f32,
        shrink: f32,
        w1: f32,
        w1_rest: f32,
        beta2: f32,
        beta2_rest: f32,
        bias_correction2_sqrt: f32,
        eps: f32,
        neg_step_size: f32,
    }
}

/// Weight decay in [`adam_elements`]: none, added to the gradient (L2), or shrinking the
/// parameter (decoupled, AdamW's).
const NO_DECAY: u8 = 0;
const L2_DECAY: u8 = 1;
const DECOUPLED_DECAY: u8 = 2;

/// An Adam step's scalars in the computing type.
#[derive(Clone, Copy)]
struct Coefficients<W> {
    /// -1 when maximizing (an exact negation), else 1.
    sign: W,
    wd: W,
    shrink: W,
    w1: W,
    w1_rest: W,
    b2: W,
    b2_rest: W,
    bc2: W,
    eps: W,
    neg_step: W,
}

/// Adam's update of one piece: `ins` param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq],
/// `outs` their new values. `LOW` picks torch.lerp's branch for a lerp weight under a half.
#[inline(always)]
fn adam_elements<T: Float, const LOW: bool, const DECAY: u8, const AMS: bool>(c: &Coefficients<T::Wide>, ins: &[&[T]], outs: &mut [&mut [T]]) {
    let round = |x: T::Wide| T::narrow(x);
    let n = ins[0].len();
    let (params, grads, avgs, sqs) = (&ins[0][..n], &ins[1][..n], &ins[2][..n], &ins[3][..n]);
    let maxes = if AMS { &ins[4][..n] } else { sqs };
    let (new_params, rest) = outs.split_at_mut(1);
    let (new_params, (new_avgs, rest)) = (&mut new_params[0][..n], rest.split_at_mut(1));
    let (new_avgs, (new_sqs, new_maxes)) = (&mut new_avgs[0][..n], rest.split_at_mut(1));
    let new_sqs = &mut new_sqs[0][..n];
    let new_maxes: &mut [T] = if AMS { &mut new_maxes[0][..n] } else { &mut [] };
    for i in 0..n {
        let param = params[i].widen();
        let mut g = grads[i].widen() * c.sign;
        let mut p = param;
        if DECAY == DECOUPLED_DECAY {
            p = round(p * c.shrink).widen();
        } else if DECAY == L2_DECAY {
            g = round(g + round(param * c.wd).widen()).widen();
        }
        // torch.lerp's two branches, as the composite's `lerp`.
        let m0 = avgs[i].widen();
        let m = round(if LOW { m0 + (g - m0) * c.w1 } else { g - (g - m0) * c.w1_rest });
        let sq = round(sqs[i].widen() * c.b2 + g * c.b2_rest * g);
        // Exact in every dtype: both are values of it.
        let second = if AMS { T::narrow(maxes[i].widen().max(sq.widen())) } else { sq };
        let denom = second.widen().sqrt() / c.bc2 + c.eps;
        new_params[i] = round(p + m.widen() / denom * c.neg_step);
        new_avgs[i] = m;
        new_sqs[i] = sq;
        if AMS {
            new_maxes[i] = second;
        }
    }
}
