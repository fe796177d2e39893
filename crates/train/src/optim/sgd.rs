//! `torch.optim.SGD`: momentum, dampening, Nesterov momentum and L2 weight decay; its update
//! as one kernel (`sgd_step`: the CPU's below, the GPU's `shaders/sgd_step.wgsl`).

use liandan_backend_cpu::kernel::{alloc_overwritten, in_pieces, slices, Float};
use liandan_tensor::{Result as TensorResult, Storage, Strided, Tensor};
use serde::{Deserialize, Serialize};

use super::core::{check_range, invalid, l2, non_negative, rule_defaults, signed, Optim, ParamState, Rule};
#[cfg(feature = "wgpu")]
use super::fused::gpu::Update;
use super::fused::{acc, stored, Kernels, Step};
use crate::error::Result;

/// Stochastic gradient descent, `torch.optim.SGD`.
pub type Sgd = Optim<SgdConfig>;

/// `torch.optim.SGD`'s hyper-parameters and defaults
/// (`SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() }`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SgdConfig {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub maximize: bool,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig { lr: 1e-3, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false, maximize: false }
    }
}

impl Rule for SgdConfig {
    const NAME: &'static str = "SGD";

    fn validate(&self) -> Result<()> {
        non_negative(Self::NAME, &[("momentum", self.momentum)])?;
        check_range(Self::NAME, "dampening", self.dampening, f64::NEG_INFINITY, f64::INFINITY, false)?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(invalid(Self::NAME, "nesterov momentum needs momentum > 0 and dampening 0".into()));
        }
        Ok(())
    }

    fn momentum(&self) -> Option<f64> {
        Some(self.momentum)
    }

    fn with_momentum(&self, momentum: f64) -> Self {
        SgdConfig { momentum, ..self.clone() }
    }

    fn reads_step_count(&self) -> bool {
        false
    }

    fn state_names(&self) -> Vec<&'static str> {
        if self.momentum != 0.0 {
            vec!["momentum_buffer"]
        } else {
            Vec::new()
        }
    }

    /// The composite of the fused `sgd_step`, and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        let mut g = l2(signed(grad, self.maximize)?, param, weight_decay)?;
        if self.momentum != 0.0 {
            let buf = match state.tensors.first() {
                // The first step starts the buffer at the gradient itself (no dampening), as
                // PyTorch does. `detach` gives the buffer its own handle on the same storage.
                None => g.detach(),
                Some(buf) => {
                    let kept = buf.mul_scalar(self.momentum)?;
                    if self.dampening == 0.0 {
                        kept.add(&g)?
                    } else {
                        kept.add(&g.mul_scalar(1.0 - self.dampening)?)?
                    }
                }
            };
            g = if self.nesterov { g.add(&buf.mul_scalar(self.momentum)?)? } else { buf.clone() };
            state.tensors = vec![buf];
        }
        param.assign(&param.sub(&g.mul_scalar(lr)?)?)?;
        Ok(())
    }

    rule_defaults!();
}

impl Kernels for SgdConfig {
    const OP: &'static str = "sgd_step";

    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)> {
        // On the first step the kernel writes the buffer without reading it: any tensor of the
        // right shape and at the start of its buffer (as the update kernels want what they
        // update) stands in, and a handle of the parameter's own costs nothing. (The gradient
        // may be a slice of a larger buffer, which would send the update down the composite's
        // path.)
        let first = state.tensors.is_empty();
        let buf = if self.momentum == 0.0 { None } else { Some(state.tensors.first().cloned().unwrap_or_else(|| param.detach())) };
        Ok((buf.into_iter().collect(), first && self.momentum != 0.0))
    }

    /// param, grad[, momentum_buffer] to their new param[, momentum_buffer].
    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>> {
        let SgdConfig { momentum, dampening, nesterov, maximize, .. } = step.rule;
        let (lr, weight_decay, first) = (step.lr, step.weight_decay, step.first);
        let v = slices::<T>(Self::OP, inputs)?;
        let n = v[0].len();
        let (wd, mom, keep, lr) = (acc::<T::Wide>(weight_decay), acc::<T::Wide>(momentum), acc::<T::Wide>(1.0 - dampening), acc::<T::Wide>(lr));
        let round = |x: T::Wide| T::narrow(x).widen();
        if momentum == 0.0 {
            // Plain SGD as one zipped loop the compiler vectorizes (the indexed loop below does
            // not), written here where the flags are known so it takes them out of the loop.
            let mut params = vec![alloc_overwritten::<T>(Self::OP, n)?];
            in_pieces(&[&v[0][..n], &v[1][..n]], &mut params, move |ins, outs| {
                outs[0].iter_mut().zip(ins[0].iter().zip(ins[1].iter())).for_each(|(out, (&p, &g))| {
                    let param = p.widen();
                    let mut g = if maximize { -g.widen() } else { g.widen() };
                    if weight_decay != 0.0 {
                        g = round(g + round(param * wd));
                    }
                    *out = T::narrow(param - round(g * lr));
                });
            });
            return Ok(stored(params));
        }
        // With momentum (the buffer read from the second step on). As Adam's: outputs written
        // in place, operands cut to `n`, so the loop vectorizes.
        let mut outs = vec![alloc_overwritten::<T>("optimizer step", n)?, alloc_overwritten::<T>("optimizer step", n)?];
        let ins: Vec<&[T]> = v.iter().take(if first { 2 } else { 3 }).map(|x| &x[..n]).collect();
        in_pieces(&ins, &mut outs, move |ins, outs| {
            let n = ins[0].len();
            let (params, grads) = (&ins[0][..n], &ins[1][..n]);
            let bufs = if first { params } else { &ins[2][..n] };
            let [new_params, new_bufs] = outs else { unreachable!("two outputs") };
            let (new_params, new_bufs) = (&mut new_params[..n], &mut new_bufs[..n]);
            for i in 0..n {
                let param = params[i].widen();
                let mut g = if maximize { -grads[i].widen() } else { grads[i].widen() };
                if weight_decay != 0.0 {
                    g = round(g + round(param * wd));
                }
                let buf = if first {
                    g
                } else if dampening == 0.0 {
                    round(round(bufs[i].widen() * mom) + g)
                } else {
                    round(round(bufs[i].widen() * mom) + round(g * keep))
                };
                new_bufs[i] = T::narrow(buf);
                g = if nesterov { round(g + round(buf * mom)) } else { buf };
                new_params[i] = T::narrow(param - round(g * lr));
            }
        });
        Ok(stored(outs))
    }

    #[cfg(feature = "wgpu")]
    type Params = SgdParams;

    /// The GPU kernel: `shaders/sgd_step.wgsl`, with `sgd_momentum.wgsl` or `sgd_plain.wgsl`.
    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> Update<SgdParams> {
        let s = &step.rule;
        let bit = |b: u32, on: bool| if on { b } else { 0 };
        let flags = bit(1, s.maximize) | bit(2, step.weight_decay != 0.0) | bit(4, step.first) | bit(8, s.nesterov) | bit(16, s.dampening != 0.0);
        let hyper = [step.weight_decay, s.momentum, 1.0 - s.dampening, step.lr].map(|x| x as f32);
        let params = Box::new(move |n, at: &[u32]| SgdParams {
            n,
            flags,
            param_at: at[0],
            grad_at: at[1],
            momentum_buffer_at: at[2],
            weight_decay: hyper[0],
            momentum: hyper[1],
            dampening_rest: hyper[2],
            lr: hyper[3],
        });
        let stateful = s.momentum != 0.0;
        let direction = if stateful { include_str!("shaders/sgd_momentum.wgsl") } else { include_str!("shaders/sgd_plain.wgsl") };
        let parts = vec![include_str!("shaders/sgd_step.wgsl"), direction];
        Update { name: "sgd_step", fixed: 2, fixed_outputs: 1, stateful, centered: false, slots: 3, parts, consts: Vec::new(), params }
    }
}

#[cfg(feature = "wgpu")]
liandan_backend_wgpu::shader_params! {
    /// `sgd_step.wgsl`'s parameters: flags (maximize 1, weight decay 2, first step 4,
    /// nesterov 8, dampening 16), every input's offset, the hyper-parameters.
    pub(crate) struct SgdParams {
        n: u32,
        flags: u32,
        param_at: u32,
        grad_at: u32,
        momentum_buffer_at: u32,
        weight_decay: f32,
        momentum: f32,
        dampening_rest: f32,
        lr: f32,
    }
}
