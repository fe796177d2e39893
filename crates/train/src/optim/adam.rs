//! `torch.optim.Adam` and `torch.optim.AdamW`: one rule, the weight decay coupled (an L2
//! penalty in the gradient) or decoupled (the parameter shrunk before the update).

use liandan_tensor::{AdamStep, FusedOp, Tensor};
use serde::{Deserialize, Serialize};

use super::core::{check_range, decay_addcmul, l2, lerp, signed, zeros_like, Optim, ParamState, Rule};
use crate::error::Result;

/// `torch.optim.Adam`: `Adam::new(params, AdamConfig::adam(1e-3))`.
pub type Adam = Optim<AdamConfig>;

/// `torch.optim.AdamW`: `AdamW::new(params, AdamConfig::adamw(1e-3))`. The same type as
/// [`Adam`]: the config's `decoupled_weight_decay` makes the difference, as in PyTorch,
/// where `AdamW` is `Adam(decoupled_weight_decay=True)`.
pub type AdamW = Optim<AdamConfig>;

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

    /// `torch.optim.AdamW`'s defaults (weight decay 0.01, decoupled) with learning rate `lr`.
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

    fn lr(&self) -> f64 {
        self.lr
    }

    fn weight_decay(&self) -> f64 {
        self.weight_decay
    }

    fn validate(&self) -> Result<()> {
        check_range(Self::NAME, "betas.0", self.betas.0, 0.0, 1.0, false)?;
        check_range(Self::NAME, "betas.1", self.betas.1, 0.0, 1.0, false)?;
        check_range(Self::NAME, "eps", self.eps, 0.0, f64::INFINITY, false)
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

    fn fused_step(&self, lr: f64, weight_decay: f64, param: &Tensor, _grad: &Tensor, state: &mut ParamState) -> Result<Option<(FusedOp, Vec<Tensor>)>> {
        let (beta1, beta2) = self.betas;
        if state.tensors.is_empty() {
            state.tensors = self.state_names().iter().map(|_| zeros_like(param)).collect::<Result<_>>()?;
        }
        let op = FusedOp::AdamStep(AdamStep {
            lr,
            beta1,
            beta2,
            eps: self.eps,
            weight_decay,
            step: state.step,
            amsgrad: self.amsgrad,
            maximize: self.maximize,
            decoupled_weight_decay: self.decoupled_weight_decay,
        });
        Ok(Some((op, state.tensors.clone())))
    }

    /// The composite of [`FusedOp::AdamStep`], and its oracle.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        let (beta1, beta2) = self.betas;
        let Some((op, _)) = self.fused_step(lr, weight_decay, param, grad, state)? else { unreachable!("Adam has a fused step") };
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
        let FusedOp::AdamStep(hyper) = op else { unreachable!("built above") };
        let (step_size, bias_correction2_sqrt) = hyper.corrections();
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
}
