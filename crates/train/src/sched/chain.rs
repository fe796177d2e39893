//! The machinery of PyTorch's `LRScheduler` base class, shared by every epoch-counting
//! scheduler: base learning rates, `last_epoch`, the step count, and the initial step that
//! construction takes.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::{group_lrs, state_err, LrScheduler};
use crate::error::Result;
use crate::optim::Optimizer;

/// Where a scheduler stands when it computes the next learning rates (PyTorch's
/// `last_epoch`, `_step_count` and `_is_initial`).
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub last_epoch: i64,
    pub step_count: u64,
    /// True during the step that construction takes.
    pub is_initial: bool,
}

/// One schedule's formulas, written as PyTorch writes them (learning rates must come out
/// bit for bit the same, and the recursive form rounds differently from the closed one).
pub trait Schedule: Clone + Send + Serialize + DeserializeOwned + 'static {
    /// The `torch.optim.lr_scheduler` class name, also the tag of saved state.
    const NAME: &'static str;

    /// PyTorch's `get_lr()` for group `group`: the next learning rate from the group's
    /// `current` one and its `base` (`initial_lr`).
    fn lr(&self, ctx: &Ctx, group: usize, current: f64, base: f64) -> Result<f64>;

    /// PyTorch's `_get_closed_form_lr()`, where the class has one (used when `SequentialLR`
    /// reaches a milestone).
    fn closed_form(&self, _last_epoch: i64, _group: usize, _base: f64) -> Option<f64> {
        None
    }

    /// The momentum to give group `group` with the lr from [`Schedule::lr`], for schedules
    /// that cycle it (OneCycleLR); `None` leaves the optimizer's momentum alone.
    fn momentum(&self, _ctx: &Ctx, _group: usize) -> Result<Option<f64>> {
        Ok(None)
    }

    /// The base learning rates from the groups' current ones (OneCycleLR sets its own).
    fn base_lrs(&mut self, current: Vec<f64>) -> Result<Vec<f64>> {
        Ok(current)
    }
}

/// An epoch-counting scheduler running [`Schedule`] `S`; use it through its aliases
/// ([`super::StepLR`], [`super::CosineAnnealingLR`], ...).
#[derive(Clone, Debug)]
pub struct Scheduled<S: Schedule> {
    pub(crate) schedule: S,
    base_lrs: Vec<f64>,
    last_epoch: i64,
    step_count: u64,
    last_lr: Vec<f64>,
}

impl<S: Schedule> Scheduled<S> {
    /// Attaches `schedule` to `optimizer` and takes the initial step, as PyTorch's constructor
    /// does (which already sets the first learning rate, e.g. `LinearLR`'s warm-up start).
    pub fn start(optimizer: &mut dyn Optimizer, mut schedule: S) -> Result<Scheduled<S>> {
        let base_lrs = schedule.base_lrs(group_lrs(optimizer))?;
        let mut s = Scheduled { schedule, base_lrs, last_epoch: -1, step_count: 0, last_lr: Vec::new() };
        s.restart(optimizer)?;
        Ok(s)
    }

    /// The schedule's parameters.
    pub fn schedule(&self) -> &S {
        &self.schedule
    }

    /// PyTorch's `last_epoch`: steps taken since construction.
    pub fn last_epoch(&self) -> i64 {
        self.last_epoch
    }

    /// PyTorch's `_update_lr`: the learning rates at `last_epoch`, set on the optimizer.
    fn update(&mut self, optimizer: &mut dyn Optimizer, is_initial: bool, closed_form: bool) -> Result<()> {
        let ctx = Ctx { last_epoch: self.last_epoch, step_count: self.step_count, is_initial };
        let current = group_lrs(optimizer);
        if current.len() != self.base_lrs.len() {
            return Err(state_err(
                S::NAME,
                format!("the optimizer has {} parameter groups but the scheduler was made for {}", current.len(), self.base_lrs.len()),
            ));
        }
        let mut lrs = Vec::with_capacity(current.len());
        let mut momenta = Vec::with_capacity(current.len());
        for (i, (&lr, &base)) in current.iter().zip(&self.base_lrs).enumerate() {
            let closed = if closed_form { self.schedule.closed_form(self.last_epoch, i, base) } else { None };
            lrs.push(match closed {
                Some(v) => v,
                None => self.schedule.lr(&ctx, i, lr, base)?,
            });
            momenta.push(self.schedule.momentum(&ctx, i)?);
        }
        for (i, (&lr, momentum)) in lrs.iter().zip(momenta).enumerate() {
            optimizer.set_lr(i, lr);
            if let Some(m) = momentum {
                optimizer.set_momentum(i, m)?;
            }
        }
        self.last_lr = lrs;
        Ok(())
    }
}

impl<S: Schedule> LrScheduler for Scheduled<S> {
    fn step(&mut self, optimizer: &mut dyn Optimizer, _metric: Option<f64>) -> Result<()> {
        self.step_count += 1;
        self.last_epoch += 1;
        self.update(optimizer, false, false)
    }

    fn last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }

    fn state_dict(&self) -> Value {
        json!({
            "scheduler": S::NAME,
            "schedule": serde_json::to_value(&self.schedule).unwrap_or(Value::Null),
            "base_lrs": self.base_lrs,
            "last_epoch": self.last_epoch,
            "step_count": self.step_count,
            "last_lr": self.last_lr,
        })
    }

    fn load_state_dict(&mut self, state: &Value) -> Result<()> {
        let op = S::NAME;
        let kind = state.get("scheduler").and_then(Value::as_str).unwrap_or("<missing>");
        if kind != S::NAME {
            return Err(state_err(op, format!("the state was saved by {kind}, not {}", S::NAME)));
        }
        let field = |k: &str| state.get(k).cloned().ok_or_else(|| state_err(op, format!("the saved state has no `{k}`")));
        let parse = |k: &str, e: serde_json::Error| state_err(op, format!("`{k}` does not read: {e}"));
        let schedule: S = serde_json::from_value(field("schedule")?).map_err(|e| parse("schedule", e))?;
        let base_lrs: Vec<f64> = serde_json::from_value(field("base_lrs")?).map_err(|e| parse("base_lrs", e))?;
        let last_lr: Vec<f64> = serde_json::from_value(field("last_lr")?).map_err(|e| parse("last_lr", e))?;
        let last_epoch: i64 = serde_json::from_value(field("last_epoch")?).map_err(|e| parse("last_epoch", e))?;
        let step_count: u64 = serde_json::from_value(field("step_count")?).map_err(|e| parse("step_count", e))?;
        if base_lrs.len() != self.base_lrs.len() || last_lr.len() != self.base_lrs.len() {
            return Err(state_err(op, format!("the state is for {} parameter groups but this scheduler has {}", base_lrs.len(), self.base_lrs.len())));
        }
        *self = Scheduled { schedule, base_lrs, last_epoch, step_count, last_lr };
        Ok(())
    }
}

/// What [`super::SequentialLR`] needs of the schedulers it chains (PyTorch reaches into their
/// attributes for the same).
pub trait Chainable: LrScheduler {
    /// The base learning rates.
    fn base_lrs(&self) -> Vec<f64>;
    /// Replaces the base learning rates (all chained schedulers share the first one's).
    fn set_base_lrs(&mut self, base_lrs: Vec<f64>);
    /// Steps `last_epoch` back by one (PyTorch's `recursive_undo`).
    fn undo(&mut self);
    /// Takes the initial step again (PyTorch's `_initial_step`).
    fn restart(&mut self, optimizer: &mut dyn Optimizer) -> Result<()>;
    /// Jumps to `epoch`, through the closed form where there is one (`_update_lr(epoch)`).
    fn jump_to(&mut self, optimizer: &mut dyn Optimizer, epoch: i64) -> Result<()>;
}

impl<S: Schedule> Chainable for Scheduled<S> {
    fn base_lrs(&self) -> Vec<f64> {
        self.base_lrs.clone()
    }

    fn set_base_lrs(&mut self, base_lrs: Vec<f64>) {
        self.base_lrs = base_lrs;
    }

    fn undo(&mut self) {
        self.last_epoch -= 1;
    }

    fn restart(&mut self, optimizer: &mut dyn Optimizer) -> Result<()> {
        self.step_count = 1;
        self.last_epoch += 1;
        self.update(optimizer, true, false)
    }

    fn jump_to(&mut self, optimizer: &mut dyn Optimizer, epoch: i64) -> Result<()> {
        self.last_epoch = epoch;
        self.update(optimizer, false, true)
    }
}
