//! `torch.optim.RMSprop`: plain, with momentum, and centered; its update as one kernel
//! (`rmsprop_step`: the CPU's below, the GPU's `shaders/rmsprop_step.wgsl`).

use liandan_backend_cpu::kernel::{in_pieces, slices, Float};
use liandan_tensor::{Result as TensorResult, Storage, Strided, Tensor};
use num_traits::Float as _;
use serde::{Deserialize, Serialize};

use super::core::{decay_addcmul, l2, lerp, non_negative, rule_defaults, signed, Optim, ParamState, Rule};
#[cfg(feature = "wgpu")]
use super::fused::gpu::{Update, GRADIENT};
use super::fused::{self, buffers, l2_grad, scalar, stored, Kernels, Step};
use crate::error::Result;

/// `torch.optim.RMSprop`.
pub type RmsProp = Optim<RmsPropConfig>;

/// `torch.optim.RMSprop`'s hyper-parameters and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RmsPropConfig {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub centered: bool,
    pub maximize: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig { lr: 1e-2, alpha: 0.99, eps: 1e-8, weight_decay: 0.0, momentum: 0.0, centered: false, maximize: false }
    }
}

impl Rule for RmsPropConfig {
    const NAME: &'static str = "RMSprop";

    fn validate(&self) -> Result<()> {
        non_negative(Self::NAME, &[("alpha", self.alpha), ("momentum", self.momentum), ("eps", self.eps)])
    }

    fn momentum(&self) -> Option<f64> {
        Some(self.momentum)
    }

    fn with_momentum(&self, momentum: f64) -> Self {
        RmsPropConfig { momentum, ..self.clone() }
    }

    fn reads_step_count(&self) -> bool {
        false
    }

    fn state_names(&self) -> Vec<&'static str> {
        let mut names = vec!["square_avg"];
        if self.momentum > 0.0 {
            names.push("momentum_buffer");
        }
        if self.centered {
            names.push("grad_avg");
        }
        names
    }

    /// The composite of the fused `rmsprop_step`, and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        // The state's zeros on the first step.
        self.operands(param, state)?;
        let g = l2(signed(grad, self.maximize)?, param, weight_decay)?;
        let mut next = Vec::with_capacity(state.tensors.len());
        let square_avg = decay_addcmul(&state.tensors[0], self.alpha, &g, &g, 1.0 - self.alpha)?;
        next.push(square_avg.clone());
        let avg = if self.centered {
            let grad_avg = lerp(state.tensors.last().expect("centered keeps grad_avg last"), &g, 1.0 - self.alpha)?;
            let avg = square_avg.add(&grad_avg.mul_scalar(-1.0)?.mul(&grad_avg)?)?.sqrt()?;
            next.push(grad_avg);
            avg
        } else {
            square_avg.sqrt()?
        };
        let avg = avg.add_scalar(self.eps)?;
        if self.momentum > 0.0 {
            let buf = state.tensors[1].mul_scalar(self.momentum)?.add(&g.div(&avg)?)?;
            param.assign(&param.add(&buf.mul_scalar(-lr)?)?)?;
            next.insert(1, buf);
        } else {
            param.assign(&param.add(&g.div(&avg)?.mul_scalar(-lr)?)?)?;
        }
        state.tensors = next;
        Ok(())
    }

    rule_defaults!();
}

impl Kernels for RmsPropConfig {
    const OP: &'static str = "rmsprop_step";

    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)> {
        if state.tensors.is_empty() {
            state.tensors = self.state_names().iter().map(|_| param.zeros_like()).collect::<TensorResult<_>>()?;
        }
        Ok((state.tensors.clone(), false))
    }

    /// param, grad, square_avg[, momentum_buffer][, grad_avg] to their new param,
    /// square_avg[, momentum_buffer][, grad_avg].
    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>> {
        let RmsPropConfig { alpha, eps, momentum, centered, maximize, .. } = step.rule;
        let (lr, weight_decay) = (step.lr, step.weight_decay);
        let v = slices::<T>(Self::OP, inputs)?;
        let n = v[0].len();
        let (with_momentum, grad_avg_at) = (momentum > 0.0, 3 + (momentum > 0.0) as usize);
        let (wd, a, a_rest, mom, eps, neg_lr) =
            (scalar::<T>(weight_decay), scalar::<T>(alpha), scalar::<T>(1.0 - alpha), scalar::<T>(momentum), scalar::<T>(eps), scalar::<T>(-lr));
        // The composite's lerp weight `1 - alpha` and its complement, both from f64.
        let (w, w_rest) = (scalar::<T>(1.0 - alpha), scalar::<T>(1.0 - (1.0 - alpha)));
        let round = |x: T::Wide| T::narrow(x).widen();
        let low_weight = (1.0 - alpha).abs() < 0.5;
        // As Adam's: outputs written in place, operands cut to `n`, so the loop vectorizes;
        // absent optional state reads as `sqs`, and its output (as Adam's amsgrad one) is never
        // written.
        let (ins, mut outs) = buffers(&v, 2 + with_momentum as usize + centered as usize, n)?;
        in_pieces(&ins, &mut outs, move |ins, outs| {
            let n = ins[0].len();
            let (params, grads, sqs) = (&ins[0][..n], &ins[1][..n], &ins[2][..n]);
            let bufs = if with_momentum { &ins[3][..n] } else { sqs };
            let avgs = if centered { &ins[grad_avg_at][..n] } else { sqs };
            let (new_params, rest) = outs.split_at_mut(1);
            let (new_sqs, rest) = rest.split_at_mut(1);
            let (new_bufs, new_avgs) = rest.split_at_mut(with_momentum as usize);
            let (new_params, new_sqs) = (&mut new_params[0][..n], &mut new_sqs[0][..n]);
            for i in 0..n {
                let param = params[i].widen();
                let g = l2_grad::<T>(param, grads[i], maximize, weight_decay, wd);
                let sq = fused::decay_addcmul::<T>(sqs[i].widen(), a, g, g, a_rest);
                new_sqs[i] = T::narrow(sq);
                let mut avg = sq;
                if centered {
                    let m0 = avgs[i].widen();
                    let diff = round(g - m0);
                    let m = if low_weight { round(m0 + round(diff * w)) } else { round(g - round(diff * w_rest)) };
                    new_avgs[0][i] = T::narrow(m);
                    avg = round(sq + round(-m * m));
                }
                let avg = round(round(avg.sqrt()) + eps);
                let mut step = round(g / avg);
                if with_momentum {
                    step = round(round(bufs[i].widen() * mom) + step);
                    new_bufs[0][i] = T::narrow(step);
                }
                new_params[i] = T::narrow(param + round(step * neg_lr));
            }
        });
        Ok(stored(outs))
    }

    #[cfg(feature = "wgpu")]
    type Params = RmsPropParams;

    /// The GPU kernel: `shaders/rmsprop_step.wgsl`, with the momentum and centered parts.
    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> Update<RmsPropParams> {
        let r = &step.rule;
        let bit = |b: u32, on: bool| if on { b } else { 0 };
        let flags = bit(1, r.maximize) | bit(2, step.weight_decay != 0.0) | bit(4, (1.0 - r.alpha).abs() < 0.5);
        let hyper = [step.weight_decay, r.alpha, 1.0 - r.alpha, 1.0 - (1.0 - r.alpha), r.eps, r.momentum, -step.lr].map(|x| x as f32);
        let params = Box::new(move |n, at: &[u32]| RmsPropParams {
            n,
            flags,
            param_at: at[0],
            grad_at: at[1],
            square_avg_at: at[2],
            momentum_buffer_at: at[3],
            grad_avg_at: at[4],
            weight_decay: hyper[0],
            alpha: hyper[1],
            alpha_rest: hyper[2],
            alpha_lerp: hyper[3],
            eps: hyper[4],
            momentum: hyper[5],
            neg_lr: hyper[6],
        });
        let (stateful, centered) = (r.momentum > 0.0, r.centered);
        let direction = if stateful { include_str!("shaders/rmsprop_momentum.wgsl") } else { include_str!("shaders/rmsprop_plain.wgsl") };
        let mean = if centered { include_str!("shaders/rmsprop_centered.wgsl") } else { include_str!("shaders/rmsprop_uncentered.wgsl") };
        let parts = vec![GRADIENT, include_str!("shaders/rmsprop_step.wgsl"), direction, mean];
        // The gradient average's bindings come after the momentum buffer's, when it has them.
        let consts = if centered { vec![("GRAD_AVG", if stateful { 8 } else { 6 })] } else { Vec::new() };
        Update { name: "rmsprop_step", fixed: 3, fixed_outputs: 2, stateful, centered, slots: 5, parts, consts, params }
    }
}

#[cfg(feature = "wgpu")]
liandan_backend_wgpu::shader_params! {
    /// `rmsprop_step.wgsl`'s parameters: flags (maximize 1, weight decay 2, lerp from
    /// grad_avg 4), every input's offset, the hyper-parameters.
    pub(crate) struct RmsPropParams {
        n: u32,
        flags: u32,
        param_at: u32,
        grad_at: u32,
        square_avg_at: u32,
        momentum_buffer_at: u32,
        grad_avg_at: u32,
        weight_decay: f32,
        alpha: f32,
        alpha_rest: f32,
        alpha_lerp: f32,
        eps: f32,
        momentum: f32,
        neg_lr: f32,
    }
}
