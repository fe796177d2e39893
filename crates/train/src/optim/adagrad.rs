//! `torch.optim.Adagrad`, with learning-rate decay and an initial accumulator value.

use liandan_tensor::{AdagradStep, FusedOp, Tensor};
use serde::{Deserialize, Serialize};

use super::core::{check_range, l2, signed, Optim, ParamState, Rule};
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

    fn lr(&self) -> f64 {
        self.lr
    }

    fn weight_decay(&self) -> f64 {
        self.weight_decay
    }

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "lr_decay", self.lr_decay, 0.0, f64::INFINITY, false)?;
        check_range(Self::NAME, "initial_accumulator_value", self.initial_accumulator_value, 0.0, f64::INFINITY, false)?;
        check_range(Self::NAME, "eps", self.eps, 0.0, f64::INFINITY, false)
    }

    fn state_names(&self) -> Vec<&'static str> {
        vec!["sum"]
    }

    fn fused_step(&self, lr: f64, weight_decay: f64, param: &Tensor, _grad: &Tensor, state: &mut ParamState) -> Result<Option<(FusedOp, Vec<Tensor>)>> {
        if state.tensors.is_empty() {
            state.tensors = vec![Tensor::full(param.shape(), self.initial_accumulator_value, param.dtype(), param.device())?];
        }
        let AdagradConfig { lr_decay, eps, maximize, .. } = *self;
        let hyper = AdagradStep { lr, lr_decay, weight_decay, eps, step: state.step, maximize };
        Ok(Some((FusedOp::AdagradStep(hyper), state.tensors.clone())))
    }

    /// The composite of [`FusedOp::AdagradStep`], and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        let Some((op, _)) = self.fused_step(lr, weight_decay, param, grad, state)? else { unreachable!("Adagrad has a fused step") };
        let FusedOp::AdagradStep(hyper) = op else { unreachable!("built by fused_step") };
        let g = l2(signed(grad, self.maximize)?, param, weight_decay)?;
        let sum = state.tensors[0].clone();
        let clr = hyper.clr();
        let sum = sum.add(&g.mul(&g)?)?;
        let std = sum.sqrt()?.add_scalar(self.eps)?;
        param.assign(&param.add(&g.div(&std)?.mul_scalar(-clr)?)?)?;
        state.tensors = vec![sum];
        Ok(())
    }
}
