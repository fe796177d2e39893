//! `torch.optim.lr_scheduler.ReduceLROnPlateau`: cuts the learning rate when a monitored
//! metric stops improving.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{group_lrs, state_err, LrScheduler};
use crate::error::{Error, Result};
use crate::optim::Optimizer;

const NAME: &str = "ReduceLROnPlateau";

/// Whether lower (`Min`, a loss) or higher (`Max`, an accuracy) is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlateauMode {
    Min,
    Max,
}

/// Whether `threshold` is relative to the best value or absolute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThresholdMode {
    Rel,
    Abs,
}

/// `ReduceLROnPlateau`'s options, with PyTorch's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlateauConfig {
    pub mode: PlateauMode,
    pub factor: f64,
    pub patience: u64,
    pub threshold: f64,
    pub threshold_mode: ThresholdMode,
    pub cooldown: u64,
    /// One per group, or one for all.
    pub min_lr: Vec<f64>,
    pub eps: f64,
}

impl Default for PlateauConfig {
    fn default() -> Self {
        PlateauConfig {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: vec![0.0],
            eps: 1e-8,
        }
    }
}

/// Multiplies every group's lr by `factor` once the metric handed to `step` has not improved
/// for `patience` epochs, then waits `cooldown` epochs. `step` needs the metric.
#[derive(Clone, Debug)]
pub struct ReduceLROnPlateau {
    config: PlateauConfig,
    min_lrs: Vec<f64>,
    /// The best metric so far; `None` before the first (PyTorch's `inf` / `-inf`).
    best: Option<f64>,
    num_bad_epochs: u64,
    cooldown_counter: u64,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl ReduceLROnPlateau {
    pub fn new(optimizer: &mut dyn Optimizer, config: PlateauConfig) -> Result<ReduceLROnPlateau> {
        if config.factor.is_nan() || config.factor >= 1.0 {
            return Err(Error::InvalidArgument { op: NAME, what: format!("factor {} must be < 1.0", config.factor) });
        }
        let groups = optimizer.param_groups().len();
        let min_lrs = match config.min_lr.len() {
            1 => vec![config.min_lr[0]; groups],
            n if n == groups => config.min_lr.clone(),
            n => return Err(Error::InvalidArgument { op: NAME, what: format!("{n} min_lr values for {groups} parameter groups; give one, or one per group") }),
        };
        Ok(ReduceLROnPlateau { config, min_lrs, best: None, num_bad_epochs: 0, cooldown_counter: 0, last_epoch: 0, last_lr: group_lrs(optimizer) })
    }

    fn is_better(&self, a: f64) -> bool {
        let Some(best) = self.best else {
            // Against PyTorch's initial `inf` (or `-inf`) only NaN fails.
            return !a.is_nan();
        };
        let t = self.config.threshold;
        match (self.config.mode, self.config.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => a < best * (1.0 - t),
            (PlateauMode::Min, ThresholdMode::Abs) => a < best - t,
            (PlateauMode::Max, ThresholdMode::Rel) => a > best * (t + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => a > best + t,
        }
    }
}

impl LrScheduler for ReduceLROnPlateau {
    fn step(&mut self, optimizer: &mut dyn Optimizer, metric: Option<f64>) -> Result<()> {
        let current = metric.ok_or_else(|| Error::InvalidArgument { op: NAME, what: "step needs the monitored metric (e.g. the validation loss)".into() })?;
        self.last_epoch += 1;
        if self.is_better(current) {
            self.best = Some(current);
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.config.patience {
            for (i, old) in group_lrs(optimizer).into_iter().enumerate() {
                let new = (old * self.config.factor).max(self.min_lrs.get(i).copied().unwrap_or(0.0));
                if old - new > self.config.eps {
                    optimizer.set_lr(i, new);
                }
            }
            self.cooldown_counter = self.config.cooldown;
            self.num_bad_epochs = 0;
        }
        self.last_lr = group_lrs(optimizer);
        Ok(())
    }

    fn last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }

    fn state_dict(&self) -> Value {
        json!({
            "scheduler": NAME,
            "config": serde_json::to_value(&self.config).unwrap_or(Value::Null),
            "min_lrs": self.min_lrs,
            "best": self.best,
            "num_bad_epochs": self.num_bad_epochs,
            "cooldown_counter": self.cooldown_counter,
            "last_epoch": self.last_epoch,
            "last_lr": self.last_lr,
        })
    }

    fn load_state_dict(&mut self, state: &Value) -> Result<()> {
        let kind = state.get("scheduler").and_then(Value::as_str).unwrap_or("<missing>");
        if kind != NAME {
            return Err(state_err(NAME, format!("the state was saved by {kind}, not {NAME}")));
        }
        let get = |k: &str| state.get(k).cloned().ok_or_else(|| state_err(NAME, format!("the saved state has no `{k}`")));
        let bad = |k: &str, e: serde_json::Error| state_err(NAME, format!("`{k}` does not read: {e}"));
        let next = ReduceLROnPlateau {
            config: serde_json::from_value(get("config")?).map_err(|e| bad("config", e))?,
            min_lrs: serde_json::from_value(get("min_lrs")?).map_err(|e| bad("min_lrs", e))?,
            best: serde_json::from_value(get("best")?).map_err(|e| bad("best", e))?,
            num_bad_epochs: serde_json::from_value(get("num_bad_epochs")?).map_err(|e| bad("num_bad_epochs", e))?,
            cooldown_counter: serde_json::from_value(get("cooldown_counter")?).map_err(|e| bad("cooldown_counter", e))?,
            last_epoch: serde_json::from_value(get("last_epoch")?).map_err(|e| bad("last_epoch", e))?,
            last_lr: serde_json::from_value(get("last_lr")?).map_err(|e| bad("last_lr", e))?,
        };
        if next.min_lrs.len() != self.min_lrs.len() {
            return Err(state_err(NAME, format!("the state is for {} parameter groups but this scheduler has {}", next.min_lrs.len(), self.min_lrs.len())));
        }
        *self = next;
        Ok(())
    }
}
