//! `torch.optim.Adadelta`, the optimizer of PyTorch's MNIST example (lr 1.0); its update as
//! one kernel (`adadelta_step`: the CPU's below, the GPU's `shaders/adadelta_step.wgsl`).

use liandan_backend_cpu::kernel::{in_pieces, slices, Float};
use liandan_tensor::{Result as TensorResult, Storage, Strided, Tensor};
use num_traits::Float as _;
use serde::{Deserialize, Serialize};

use super::core::{check_range, decay_addcmul, l2, non_negative, rule_defaults, signed, Optim, ParamState, Rule};
#[cfg(feature = "wgpu")]
use super::fused::gpu::{Update, GRADIENT};
use super::fused::{self, buffers, l2_grad, scalar, stored, Kernels, Step};
use crate::error::Result;

/// `torch.optim.Adadelta`.
pub type Adadelta = Optim<AdadeltaConfig>;

/// `torch.optim.Adadelta`'s hyper-parameters and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdadeltaConfig {
    pub lr: f64,
    pub rho: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for AdadeltaConfig {
    fn default() -> Self {
        AdadeltaConfig { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0, maximize: false }
    }
}

impl Rule for AdadeltaConfig {
    const NAME: &'static str = "Adadelta";

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "rho", self.rho, 0.0, 1.0, true)?;
        non_negative(Self::NAME, &[("eps", self.eps)])
    }

    fn reads_step_count(&self) -> bool {
        false
    }

    fn state_names(&self) -> Vec<&'static str> {
        vec!["square_avg", "acc_delta"]
    }

    /// The composite of the fused `adadelta_step`, and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        // The state's zeros on the first step.
        self.operands(param, state)?;
        let g = l2(signed(grad, self.maximize)?, param, weight_decay)?;
        let square_avg = decay_addcmul(&state.tensors[0], self.rho, &g, &g, 1.0 - self.rho)?;
        let std = square_avg.add_scalar(self.eps)?.sqrt()?;
        let delta = state.tensors[1].add_scalar(self.eps)?.sqrt()?.div(&std)?.mul(&g)?;
        let acc_delta = decay_addcmul(&state.tensors[1], self.rho, &delta, &delta, 1.0 - self.rho)?;
        param.assign(&param.add(&delta.mul_scalar(-lr)?)?)?;
        state.tensors = vec![square_avg, acc_delta];
        Ok(())
    }

    rule_defaults!();
}

impl Kernels for AdadeltaConfig {
    const OP: &'static str = "adadelta_step";

    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)> {
        if state.tensors.is_empty() {
            state.tensors = vec![param.zeros_like()?, param.zeros_like()?];
        }
        Ok((state.tensors.clone(), false))
    }

    /// param, grad, square_avg, acc_delta to their new param, square_avg, acc_delta.
    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>> {
        let AdadeltaConfig { rho, eps, maximize, .. } = step.rule;
        let (lr, weight_decay) = (step.lr, step.weight_decay);
        let v = slices::<T>(Self::OP, inputs)?;
        let n = v[0].len();
        let (wd, rho, rho_rest, eps, neg_lr) = (scalar::<T>(weight_decay), scalar::<T>(rho), scalar::<T>(1.0 - rho), scalar::<T>(eps), scalar::<T>(-lr));
        let round = |x: T::Wide| T::narrow(x).widen();
        // As Adam's: outputs written in place, operands cut to `n`, so the loop vectorizes.
        let (ins, mut outs) = buffers(&v, 3, n)?;
        in_pieces(&ins, &mut outs, move |ins, outs| {
            let n = ins[0].len();
            let (params, grads, sqs, accs) = (&ins[0][..n], &ins[1][..n], &ins[2][..n], &ins[3][..n]);
            let [np, ns, na] = outs else { unreachable!("three outputs") };
            let (np, ns, na) = (&mut np[..n], &mut ns[..n], &mut na[..n]);
            for i in 0..n {
                let param = params[i].widen();
                let g = l2_grad::<T>(param, grads[i], maximize, weight_decay, wd);
                let sq = fused::decay_addcmul::<T>(sqs[i].widen(), rho, g, g, rho_rest);
                let std = round(round(sq + eps).sqrt());
                let acc0 = accs[i].widen();
                let delta = round(round(round(round(acc0 + eps).sqrt()) / std) * g);
                np[i] = T::narrow(param + round(delta * neg_lr));
                ns[i] = T::narrow(sq);
                na[i] = T::narrow(fused::decay_addcmul::<T>(acc0, rho, delta, delta, rho_rest));
            }
        });
        Ok(stored(outs))
    }

    #[cfg(feature = "wgpu")]
    type Params = AdadeltaParams;

    /// The GPU kernel: `shaders/adadelta_step.wgsl`.
    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> Update<AdadeltaParams> {
        let a = &step.rule;
        let flags = if a.maximize { 1 } else { 0 } | if step.weight_decay != 0.0 { 2 } else { 0 };
        let hyper = [step.weight_decay, a.rho, 1.0 - a.rho, a.eps, -step.lr].map(|x| x as f32);
        let params = Box::new(move |n, at: &[u32]| AdadeltaParams {
            n,
            flags,
            param_at: at[0],
            grad_at: at[1],
            square_avg_at: at[2],
            acc_delta_at: at[3],
            weight_decay: hyper[0],
            rho: hyper[1],
            rho_rest: hyper[2],
            eps: hyper[3],
            neg_lr: hyper[4],
        });
        let parts = vec![GRADIENT, include_str!("shaders/adadelta_step.wgsl")];
        Update { name: "adadelta_step", fixed: 4, fixed_outputs: 3, stateful: false, centered: false, slots: 4, parts, consts: Vec::new(), params }
    }
}

#[cfg(feature = "wgpu")]
liandan_backend_wgpu::shader_params! {
    /// `adadelta_step.wgsl`'s parameters: flags (maximize 1, weight decay 2), every input's
    /// offset, the hyper-parameters.
    pub(crate) struct AdadeltaParams {
        n: u32,
        flags: u32,
        param_at: u32,
        grad_at: u32,
        square_avg_at: u32,
        acc_delta_at: u32,
        weight_decay: f32,
        rho: f32,
        rho_rest: f32,
        eps: f32,
        neg_lr: f32,
    }
}
