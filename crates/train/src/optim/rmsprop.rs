//! `torch.optim.RMSprop`: plain, with momentum, and centered.

use liandan_tensor::{FusedOp, RmsPropStep, Tensor};
use serde::{Deserialize, Serialize};

use super::core::{check_range, decay_addcmul, l2, lerp, signed, zeros_like, Optim, ParamState, Rule};
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

    fn lr(&self) -> f64 {
        self.lr
    }

    fn weight_decay(&self) -> f64 {
        self.weight_decay
    }

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "alpha", self.alpha, 0.0, f64::INFINITY, false)?;
        check_range(Self::NAME, "momentum", self.momentum, 0.0, f64::INFINITY, false)?;
        check_range(Self::NAME, "eps", self.eps, 0.0, f64::INFINITY, false)
    }

    fn momentum(&self) -> Option<f64> {
        Some(self.momentum)
    }

    fn with_momentum(&self, momentum: f64) -> Self {
        RmsPropConfig { momentum, ..self.clone() }
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

    fn fused_step(&self, lr: f64, weight_decay: f64, param: &Tensor, _grad: &Tensor, state: &mut ParamState) -> Result<Option<(FusedOp, Vec<Tensor>)>> {
        if state.tensors.is_empty() {
            state.tensors = self.state_names().iter().map(|_| zeros_like(param)).collect::<Result<_>>()?;
        }
        let RmsPropConfig { alpha, eps, momentum, centered, maximize, .. } = *self;
        let op = FusedOp::RmsPropStep(RmsPropStep { lr, alpha, eps, weight_decay, momentum, centered, maximize });
        Ok(Some((op, state.tensors.clone())))
    }

    /// The composite of [`FusedOp::RmsPropStep`], and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        // The state's zeros on the first step.
        self.fused_step(lr, weight_decay, param, grad, state)?;
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
}
