//! `torch.optim.lr_scheduler.SequentialLR`: one scheduler until a milestone, then the next
//! (a warm-up chained with a decay).

use serde_json::{json, Value};

use super::chain::Chainable;
use super::{state_err, LrScheduler};
use crate::error::{Error, Result};
use crate::optim::Optimizer;

const NAME: &str = "SequentialLR";

/// Runs `schedulers[i]` between `milestones[i - 1]` and `milestones[i]`; at a milestone the
/// next one starts from its epoch 0 (its closed form), as PyTorch does.
pub struct SequentialLR {
    schedulers: Vec<Box<dyn Chainable>>,
    milestones: Vec<i64>,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl SequentialLR {
    /// Chains `schedulers`, built on `optimizer` beforehand (as in PyTorch), switching at
    /// `milestones` (one fewer than the schedulers).
    pub fn new(optimizer: &mut dyn Optimizer, mut schedulers: Vec<Box<dyn Chainable>>, milestones: Vec<u64>) -> Result<SequentialLR> {
        if schedulers.is_empty() {
            return Err(Error::InvalidArgument { op: NAME, what: "needs at least one scheduler".into() });
        }
        if milestones.len() + 1 != schedulers.len() {
            return Err(Error::InvalidArgument {
                op: NAME,
                what: format!("{} schedulers need {} milestones, got {}", schedulers.len(), schedulers.len() - 1, milestones.len()),
            });
        }
        // PyTorch's schedulers all read the groups' `initial_lr`, set by the first one built;
        // here each kept the lr it saw, so they are given the first one's.
        let base = schedulers[0].base_lrs();
        for (i, &lr) in base.iter().enumerate() {
            optimizer.set_lr(i, lr);
        }
        for s in &mut schedulers {
            s.set_base_lrs(base.clone());
            s.undo();
        }
        let milestones: Vec<i64> = milestones.into_iter().map(|m| m as i64).collect();
        let idx = milestones.partition_point(|&m| m <= 0);
        schedulers[idx].restart(optimizer)?;
        let last_lr = schedulers[idx].last_lr();
        Ok(SequentialLR { schedulers, milestones, last_epoch: 0, last_lr })
    }
}

impl LrScheduler for SequentialLR {
    fn step(&mut self, optimizer: &mut dyn Optimizer, metric: Option<f64>) -> Result<()> {
        self.last_epoch += 1;
        let idx = self.milestones.partition_point(|&m| m <= self.last_epoch);
        let scheduler = &mut self.schedulers[idx];
        if idx > 0 && self.milestones[idx - 1] == self.last_epoch {
            scheduler.jump_to(optimizer, 0)?;
        } else {
            scheduler.step(optimizer, metric)?;
        }
        self.last_lr = scheduler.last_lr();
        Ok(())
    }

    fn last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }

    fn state_dict(&self) -> Value {
        json!({
            "scheduler": NAME,
            "milestones": self.milestones,
            "last_epoch": self.last_epoch,
            "last_lr": self.last_lr,
            "schedulers": self.schedulers.iter().map(|s| s.state_dict()).collect::<Vec<_>>(),
        })
    }

    fn load_state_dict(&mut self, state: &Value) -> Result<()> {
        let kind = state.get("scheduler").and_then(Value::as_str).unwrap_or("<missing>");
        if kind != NAME {
            return Err(state_err(NAME, format!("the state was saved by {kind}, not {NAME}")));
        }
        let children = state.get("schedulers").and_then(Value::as_array).ok_or_else(|| state_err(NAME, "the saved state has no `schedulers` list".into()))?;
        if children.len() != self.schedulers.len() {
            return Err(state_err(NAME, format!("the state chains {} schedulers but this one chains {}", children.len(), self.schedulers.len())));
        }
        let last_epoch = state.get("last_epoch").and_then(Value::as_i64).ok_or_else(|| state_err(NAME, "the saved state has no whole `last_epoch`".into()))?;
        let last_lr: Vec<f64> = serde_json::from_value(state.get("last_lr").cloned().unwrap_or(Value::Null))
            .map_err(|e| state_err(NAME, format!("`last_lr` does not read: {e}")))?;
        // Children first: a child that refuses its state leaves this one as it was.
        let before: Vec<Value> = self.schedulers.iter().map(|s| s.state_dict()).collect();
        for (i, (s, c)) in self.schedulers.iter_mut().zip(children).enumerate() {
            if let Err(e) = s.load_state_dict(c) {
                for (s, b) in self.schedulers.iter_mut().zip(&before).take(i) {
                    s.load_state_dict(b)?;
                }
                return Err(e);
            }
        }
        self.last_epoch = last_epoch;
        self.last_lr = last_lr;
        Ok(())
    }
}
