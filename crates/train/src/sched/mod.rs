//! Learning-rate schedulers, as `torch.optim.lr_scheduler`.
//!
//! A scheduler owns no optimizer: [`LrScheduler::step`] is handed the optimizer whose
//! learning rates it sets, once per epoch or once per batch, as in PyTorch.

use crate::error::Result;
use crate::optim::Optimizer;

/// What every scheduler does.
pub trait LrScheduler: Send {
    /// Advances one step and sets the optimizer's learning rates. `metric` is the monitored
    /// value for `ReduceLROnPlateau` and ignored by the others.
    fn step(&mut self, optimizer: &mut dyn Optimizer, metric: Option<f64>) -> Result<()>;

    /// The learning rate of every group after the last step (`get_last_lr()`).
    fn last_lr(&self) -> Vec<f64>;

    /// The scheduler's state, for checkpoints.
    fn state_dict(&self) -> serde_json::Value;

    /// Restores state saved by [`LrScheduler::state_dict`].
    fn load_state_dict(&mut self, state: &serde_json::Value) -> Result<()>;
}

mod chain;
mod plateau;
mod schedules;
mod sequential;

pub use chain::{Chainable, Ctx, Schedule, Scheduled};
pub use plateau::{PlateauConfig, PlateauMode, ReduceLROnPlateau, ThresholdMode};
pub use schedules::{
    Anneal, CosineAnnealing, CosineAnnealingLR, Exponential, ExponentialLR, Linear, LinearLR, MultiStep, MultiStepLR, OneCycle, OneCycleLR, Step, StepLR,
};
pub use sequential::SequentialLR;

/// The learning rate of every group of `optimizer`.
pub(crate) fn group_lrs(optimizer: &dyn Optimizer) -> Vec<f64> {
    optimizer.param_groups().iter().map(|g| g.lr).collect()
}

/// An error about a scheduler's saved state.
pub(crate) fn state_err(op: &'static str, detail: String) -> crate::Error {
    crate::Error::State { op, detail }
}
