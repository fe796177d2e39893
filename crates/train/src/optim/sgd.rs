//! `torch.optim.SGD`: momentum, dampening, Nesterov momentum and L2 weight decay.

use liandan_tensor::{FusedOp, SgdStep, Tensor};
use serde::{Deserialize, Serialize};

use super::core::{check_range, invalid, l2, signed, Optim, ParamState, Rule};
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

    fn lr(&self) -> f64 {
        self.lr
    }

    fn weight_decay(&self) -> f64 {
        self.weight_decay
    }

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "momentum", self.momentum, 0.0, f64::INFINITY, false)?;
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

    fn state_names(&self) -> Vec<&'static str> {
        if self.momentum != 0.0 {
            vec!["momentum_buffer"]
        } else {
            Vec::new()
        }
    }

    fn fused_step(&self, lr: f64, weight_decay: f64, param: &Tensor, _grad: &Tensor, state: &mut ParamState) -> Result<Option<(FusedOp, Vec<Tensor>)>> {
        let first = state.tensors.is_empty();
        let op = FusedOp::SgdStep(SgdStep {
            lr,
            momentum: self.momentum,
            dampening: self.dampening,
            weight_decay,
            nesterov: self.nesterov,
            maximize: self.maximize,
            first,
        });
        // On the first step the kernel writes the buffer without reading it: any tensor of the
        // right shape and at the start of its buffer (as the fused ops want what they update)
        // stands in, and a handle of the parameter's own costs nothing. (The gradient may be a
        // slice of a larger buffer, which would send the update down the composite's path.)
        let buf = if self.momentum == 0.0 { None } else { Some(state.tensors.first().cloned().unwrap_or_else(|| param.detach())) };
        Ok(Some((op, buf.into_iter().collect())))
    }

    /// The composite of [`FusedOp::SgdStep`], and its oracle.
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
}
