//! Optimizers, named and defaulted as `torch.optim` names and defaults them.
//!
//! Every optimizer implements [`Optimizer`]. Parameters are handed over as named tensors
//! (`model.named_parameters()`), grouped in [`ParamGroup`]s that each carry their own
//! hyper-parameters.

use liandan_tensor::Tensor;

use crate::error::Result;

/// Parameters that share hyper-parameters (`torch.optim`'s `param_groups` entry).
#[derive(Clone)]
pub struct ParamGroup {
    /// The parameters, under their state-dict names.
    pub params: Vec<(String, Tensor)>,
    /// The group's learning rate.
    pub lr: f64,
    /// The group's weight decay (L2 penalty, or decoupled for AdamW).
    pub weight_decay: f64,
    /// The group's momentum where it differs from the config's (`None`: the config's): SGD's
    /// and RMSprop's `momentum`, Adam's `betas.0`. Schedulers that cycle momentum set it.
    pub momentum: Option<f64>,
}

/// An optimizer's whole state: tensors (step counts, moments) under names of the form
/// `<param name>.<state name>` (`fc1.weight.exp_avg`), plus the hyper-parameters of every
/// group as JSON. Enough to resume exactly.
pub struct OptimizerState {
    pub tensors: Vec<(String, Tensor)>,
    pub hyper: serde_json::Value,
}

/// What every optimizer does (`torch.optim.Optimizer`).
pub trait Optimizer: Send {
    /// Updates every parameter that has a gradient, on the parameters' device; reads nothing
    /// back to the host.
    fn step(&mut self) -> Result<()>;

    /// [`Optimizer::step`], unless `flag` (a one-element tensor: the loss scaler's
    /// [`nonfinite_flag`](crate::amp::nonfinite_flag), 0 when every gradient is finite) is not
    /// zero, when nothing changes: the skip of [`GradScaler::step`](crate::amp::GradScaler::step).
    /// This crate's optimizers decide it on the device where their update kernels can (so
    /// nothing waits for the flag) and learn the outcome at their next step; the default reads
    /// the flag back.
    fn step_unless_nonfinite(&mut self, flag: &Tensor) -> Result<()> {
        if flag.item_f64()? == 0.0 {
            self.step()
        } else {
            Ok(())
        }
    }

    /// Drops every parameter's gradient (PyTorch's default `set_to_none=True`).
    fn zero_grad(&mut self);

    /// The parameter groups, in order.
    fn param_groups(&self) -> &[ParamGroup];

    /// Sets the learning rate of group `group` (schedulers call this).
    fn set_lr(&mut self, group: usize, lr: f64);

    /// The momentum of group `group` that a scheduler may cycle (SGD's and RMSprop's
    /// `momentum`, Adam's and AdamW's `betas.0`); `None` for optimizers without one.
    fn momentum(&self, _group: usize) -> Option<f64> {
        None
    }

    /// Sets the momentum of group `group` (`OneCycleLR` calls this); an error for optimizers
    /// without one.
    fn set_momentum(&mut self, _group: usize, _momentum: f64) -> Result<()> {
        Err(crate::Error::InvalidArgument { op: "set_momentum", what: "this optimizer has no momentum or betas to set".into() })
    }

    /// The state to save in a checkpoint.
    fn state_dict(&self) -> Result<OptimizerState>;

    /// Restores state saved by [`Optimizer::state_dict`]; an error naming the offending
    /// entries when it was saved for other parameters.
    fn load_state_dict(&mut self, state: &OptimizerState) -> Result<()>;
}

mod adadelta;
mod adagrad;
mod adam;
mod adamw;
mod clip;
mod core;
pub(crate) mod fused;
mod rmsprop;
mod sgd;
mod state;
mod step;

pub use adadelta::{Adadelta, AdadeltaConfig};
pub use adagrad::{Adagrad, AdagradConfig};
pub use adam::{Adam, AdamConfig};
pub use adamw::{AdamW, AdamWConfig};
pub use clip::{clip_grad_norm_, clip_grad_value_};
pub use core::{FusedUpdate, Optim, ParamState, Params, Rule};
pub use rmsprop::{RmsProp, RmsPropConfig};
pub use sgd::{Sgd, SgdConfig};

impl ParamGroup {
    /// A group of `params` with its own `lr` and `weight_decay`.
    pub fn new(params: Vec<(String, Tensor)>, lr: f64, weight_decay: f64) -> ParamGroup {
        ParamGroup { params, lr, weight_decay, momentum: None }
    }

    /// The usual split: weights (rank 2 and up) decayed by `weight_decay`; biases and
    /// normalization scales (rank 0 and 1) not decayed, as most recipes train them. Empty
    /// groups are left out.
    pub fn decay_split(params: Vec<(String, Tensor)>, lr: f64, weight_decay: f64) -> Vec<ParamGroup> {
        let (decay, no_decay): (Vec<_>, Vec<_>) = params.into_iter().partition(|(_, t)| t.rank() >= 2);
        [ParamGroup::new(decay, lr, weight_decay), ParamGroup::new(no_decay, lr, 0.0)].into_iter().filter(|g| !g.params.is_empty()).collect()
    }
}

/// The optimizer `docs/MODEL_ZOO.md` trains a zoo model with, over `params`.
pub fn for_zoo(spec: &liandan_nn::zoo::ZooSpec, params: Vec<(String, Tensor)>) -> Result<Box<dyn Optimizer>> {
    use liandan_nn::zoo::OptimizerSpec;
    Ok(match spec.optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay } => Box::new(Sgd::new(params, SgdConfig { lr, momentum, weight_decay, ..SgdConfig::default() })?),
        OptimizerSpec::Adadelta { lr } => Box::new(Adadelta::new(params, AdadeltaConfig { lr, ..AdadeltaConfig::default() })?),
        OptimizerSpec::Adam { lr } => Box::new(Adam::new(params, AdamConfig::adam(lr))?),
        OptimizerSpec::AdamW { lr } => Box::new(AdamW::new(params, AdamWConfig::new(lr))?),
    })
}
