//! `torch.optim.Adadelta`, the optimizer of PyTorch's MNIST example (lr 1.0).

use liandan_tensor::{AdadeltaStep, FusedOp, Tensor};
use serde::{Deserialize, Serialize};

use super::core::{check_range, decay_addcmul, l2, signed, zeros_like, Optim, ParamState, Rule};
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

    fn lr(&self) -> f64 {
        self.lr
    }

    fn weight_decay(&self) -> f64 {
        self.weight_decay
    }

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "rho", self.rho, 0.0, 1.0, true)?;
        check_range(Self::NAME, "eps", self.eps, 0.0, f64::INFINITY, false)
    }

    fn state_names(&self) -> Vec<&'static str> {
        vec!["square_avg", "acc_delta"]
    }

    fn fused_step(&self, lr: f64, weight_decay: f64, param: &Tensor, _grad: &Tensor, state: &mut ParamState) -> Result<Option<(FusedOp, Vec<Tensor>)>> {
        if state.tensors.is_empty() {
            state.tensors = vec![zeros_like(param)?, zeros_like(param)?];
        }
        let AdadeltaConfig { rho, eps, maximize, .. } = *self;
        let op = FusedOp::AdadeltaStep(AdadeltaStep { lr, rho, eps, weight_decay, maximize });
        Ok(Some((op, state.tensors.clone())))
    }

    /// The composite of [`FusedOp::AdadeltaStep`], and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        // The state's zeros on the first step.
        self.fused_step(lr, weight_decay, param, grad, state)?;
        let g = l2(signed(grad, self.maximize)?, param, weight_decay)?;
        let square_avg = decay_addcmul(&state.tensors[0], self.rho, &g, &g, 1.0 - self.rho)?;
        let std = square_avg.add_scalar(self.eps)?.sqrt()?;
        let delta = state.tensors[1].add_scalar(self.eps)?.sqrt()?.div(&std)?.mul(&g)?;
        let acc_delta = decay_addcmul(&state.tensors[1], self.rho, &delta, &delta, 1.0 - self.rho)?;
        param.assign(&param.add(&delta.mul_scalar(-lr)?)?)?;
        state.tensors = vec![square_avg, acc_delta];
        Ok(())
    }
}
