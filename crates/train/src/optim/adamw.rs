//! `torch.optim.AdamW`: Adam's rule with the weight decay always decoupled, under a type and
//! config of its own, so that `AdamW::new` can only build AdamW. Its kernels are Adam's.

use liandan_backend_cpu::kernel::Float;
use liandan_tensor::{Result as TensorResult, Storage, Strided, Tensor};
use serde::{Deserialize, Serialize};

use super::adam::AdamConfig;
#[cfg(feature = "wgpu")]
use super::adam::AdamParams;
use super::core::{rule_defaults, Optim, ParamState, Rule};
#[cfg(feature = "wgpu")]
use super::fused::gpu::Update;
use super::fused::{Kernels, Step};
use crate::error::Result;

/// `torch.optim.AdamW`: `AdamW::new(params, AdamWConfig::default())` (weight decay 0.01,
/// decoupled). A type of its own: handing it an [`AdamConfig`], which would make plain Adam,
/// does not compile.
///
/// ```
/// use liandan_train::optim::{AdamW, AdamWConfig};
/// let params: Vec<(String, liandan_train::nn::Tensor)> = Vec::new();
/// let adamw = AdamW::new(params, AdamWConfig { lr: 3e-4, ..AdamWConfig::default() });
/// ```
///
/// ```compile_fail
/// use liandan_train::optim::{AdamConfig, AdamW};
/// let params: Vec<(String, liandan_train::nn::Tensor)> = Vec::new();
/// let adam_in_disguise = AdamW::new(params, AdamConfig::default());
/// ```
pub type AdamW = Optim<AdamWConfig>;

/// The hyper-parameters of [`AdamW`], named and defaulted as `torch.optim.AdamW` names and
/// defaults them (lr 1e-3, weight decay 0.01): Adam's, with the weight decay always decoupled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamWConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    pub maximize: bool,
}

impl AdamWConfig {
    /// `torch.optim.AdamW`'s defaults with learning rate `lr`.
    pub fn new(lr: f64) -> AdamWConfig {
        AdamWConfig { lr, ..AdamWConfig::default() }
    }

    /// The same update as an Adam config (`decoupled_weight_decay` set), which runs it.
    fn as_adam(&self) -> AdamConfig {
        let AdamWConfig { lr, betas, eps, weight_decay, amsgrad, maximize } = self.clone();
        AdamConfig { lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay: true }
    }
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 1e-2, amsgrad: false, maximize: false }
    }
}

/// Adam's step over the same hyper-parameters.
fn adam_step(step: &Step<AdamWConfig>) -> Step<AdamConfig> {
    Step { rule: step.rule.as_adam(), lr: step.lr, weight_decay: step.weight_decay, step: step.step, first: step.first }
}

impl Rule for AdamWConfig {
    const NAME: &'static str = "AdamW";

    fn validate(&self) -> Result<()> {
        self.as_adam().validate()
    }

    fn momentum(&self) -> Option<f64> {
        Some(self.betas.0)
    }

    fn with_momentum(&self, momentum: f64) -> Self {
        AdamWConfig { betas: (momentum, self.betas.1), ..self.clone() }
    }

    fn state_names(&self) -> Vec<&'static str> {
        self.as_adam().state_names()
    }

    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()> {
        self.as_adam().update(lr, weight_decay, param, grad, state)
    }

    rule_defaults!();
}

impl Kernels for AdamWConfig {
    const OP: &'static str = AdamConfig::OP;

    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)> {
        self.as_adam().operands(param, state)
    }

    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>> {
        AdamConfig::cpu::<T>(&adam_step(step), inputs)
    }

    #[cfg(feature = "wgpu")]
    type Params = AdamParams;

    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> Update<AdamParams> {
        AdamConfig::gpu(&adam_step(step))
    }
}
