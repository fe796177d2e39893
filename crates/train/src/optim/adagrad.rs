//! `torch.optim.Adagrad`, with learning-rate decay and an initial accumulator value; its update
//! as one kernel (`adagrad_step`: the CPU's below, the GPU's `shaders/adagrad_step.wgsl`).

use liandan_backend_cpu::kernel::{in_pieces, slices, Float};
use liandan_tensor::{Result as TensorResult, Storage, Strided, Tensor};
use num_traits::Float as _;
use serde::{Deserialize, Serialize};

use super::core::{l2, non_negative, rule_defaults, signed, Optim, ParamState, Rule};
#[cfg(feature = "wgpu")]
use super::fused::gpu::{Update, GRADIENT};
use super::fused::{buffers, l2_grad, scalar, stored, Kernels, Step};
use crate::error::Result;

/// `torch.optim.Adagrad`.
pub type Adagrad = Optim<AdagradConfig>;

/// `torch.optim.Adagrad`'s hyper-parameters and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdagradConfig {
    pub lr: f64,
    pub lr_decay: f64,
    pub weight_decay: f64,
    pub initial_accumulator_value: f64,
    pub eps: f64,
    pub maximize: bool,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig { lr: 1e-2, lr_decay: 0.0, weight_decay: 0.0, initial_accumulator_value: 0.0, eps: 1e-10, maximize: false }
    }
}

impl Rule for AdagradConfig {
    const NAME: &'static str = "Adagrad";

    fn validate(&self) -> Result<()> {
        non_negative(Self::NAME, &[("lr_decay", self.lr_decay), ("initial_accumulator_value", self.initial_accumulator_value), ("eps", self.eps)])
    }

    /// The step count reaches the arithmetic only through the learning-rate decay.
    fn reads_step_count(&self) -> bool {
        self.lr_decay != 0.0
    }

    fn state_names(&self) -> Vec<&'static str> {
        vec!["sum"]
    }

    /// The composite of the fused `adagrad_step`, and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        self.operands(param, state)?;
        let g = l2(signed(grad, self.maximize)?, param, weight_decay)?;
        let sum = state.tensors[0].clone();
        let clr = self.clr(lr, state.step);
        let sum = sum.add(&g.mul(&g)?)?;
        let std = sum.sqrt()?.add_scalar(self.eps)?;
        param.assign(&param.add(&g.div(&std)?.mul_scalar(-clr)?)?)?;
        state.tensors = vec![sum];
        Ok(())
    }

    rule_defaults!();
}

impl AdagradConfig {
    /// The decayed learning rate `lr / (1 + (step - 1) lr_decay)`, in f64 on the host as
    /// PyTorch computes it.
    fn clr(&self, lr: f64, step: u64) -> f64 {
        lr / (1.0 + (step as f64 - 1.0) * self.lr_decay)
    }
}

impl Kernels for AdagradConfig {
    const OP: &'static str = "adagrad_step";

    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)> {
        if state.tensors.is_empty() {
            state.tensors = vec![Tensor::full(param.shape(), self.initial_accumulator_value, param.dtype(), param.device())?];
        }
        Ok((state.tensors.clone(), false))
    }

    /// param, grad, sum to their new param, sum.
    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>> {
        let AdagradConfig { eps, maximize, .. } = step.rule;
        let weight_decay = step.weight_decay;
        let v = slices::<T>(Self::OP, inputs)?;
        let n = v[0].len();
        let (wd, eps, neg_clr) = (scalar::<T>(weight_decay), scalar::<T>(eps), scalar::<T>(-step.rule.clr(step.lr, step.step)));
        let round = |x: T::Wide| T::narrow(x).widen();
        // As Adam's: outputs written in place, operands cut to `n`, so the loop vectorizes.
        let (ins, mut outs) = buffers(&v, 2, n)?;
        in_pieces(&ins, &mut outs, move |ins, outs| {
            let n = ins[0].len();
            let (params, grads, sums) = (&ins[0][..n], &ins[1][..n], &ins[2][..n]);
            let [np, ns] = outs else { unreachable!("two outputs") };
            let (np, ns) = (&mut np[..n], &mut ns[..n]);
            for i in 0..n {
                let param = params[i].widen();
                let g = l2_grad::<T>(param, grads[i], maximize, weight_decay, wd);
                let sum = round(sums[i].widen() + round(g * g));
                let std = round(round(sum.sqrt()) + eps);
                np[i] = T::narrow(param + round(round(g / std) * neg_clr));
                ns[i] = T::narrow(sum);
            }
        });
        Ok(stored(outs))
    }

    #[cfg(feature = "wgpu")]
    type Params = AdagradParams;

    /// The GPU kernel: `shaders/adagrad_step.wgsl`.
    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> Update<AdagradParams> {
        let a = &step.rule;
        let flags = if a.maximize { 1 } else { 0 } | if step.weight_decay != 0.0 { 2 } else { 0 };
        let hyper = [step.weight_decay, a.eps, -a.clr(step.lr, step.step)].map(|x| x as f32);
        let params = Box::new(move |n, at: &[u32]| AdagradParams {
            n,
            flags,
            param_at: at[0],
            grad_at: at[1],
            sum_at: at[2],
            weight_decay: hyper[0],
            eps: hyper[1],
            neg_clr: hyper[2],
        });
        let parts = vec![GRADIENT, include_str!("shaders/adagrad_step.wgsl")];
        Update { name: "adagrad_step", fixed: 3, fixed_outputs: 2, stateful: false, centered: false, slots: 3, parts, consts: Vec::new(), params }
    }
}

#[cfg(feature = "wgpu")]
liandan_backend_wgpu::shader_params! {
    /// `adagrad_step.wgsl`'s parameters: flags (maximize 1, weight decay 2), every input's
    /// offset, the hyper-parameters (`neg_clr` the decayed lr, negated).
    pub(crate) struct AdagradParams {
        n: u32,
        flags: u32,
        param_at: u32,
        grad_at: u32,
        sum_at: u32,
        weight_decay: f32,
        eps: f32,
        neg_clr: f32,
    }
}
