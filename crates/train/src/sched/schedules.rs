//! The epoch-counting schedules: StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR,
//! LinearLR and OneCycleLR, each PyTorch's formula with PyTorch's order of operations.

use std::f64::consts::PI;

use serde::{Deserialize, Serialize};

use super::chain::{Ctx, Schedule, Scheduled};
use crate::error::{Error, Result};
use crate::optim::Optimizer;

fn invalid(op: &'static str, what: String) -> Error {
    Error::InvalidArgument { op, what }
}

/// `gamma ** n` as Python computes a float to an int power (C's `pow`, not repeated products).
fn powi(gamma: f64, n: i64) -> f64 {
    gamma.powf(n as f64)
}

/// `torch.optim.lr_scheduler.StepLR`: the lr times `gamma` every `step_size` epochs.
pub type StepLR = Scheduled<Step>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub step_size: u64,
    pub gamma: f64,
}

impl StepLR {
    pub fn new(optimizer: &mut dyn Optimizer, step_size: u64, gamma: f64) -> Result<StepLR> {
        if step_size == 0 {
            return Err(invalid("StepLR", "step_size must be at least 1".into()));
        }
        Scheduled::start(optimizer, Step { step_size, gamma })
    }
}

impl Schedule for Step {
    const NAME: &'static str = "StepLR";

    fn lr(&self, ctx: &Ctx, _: usize, current: f64, _: f64) -> Result<f64> {
        let e = ctx.last_epoch;
        Ok(if e == 0 || e % self.step_size as i64 != 0 { current } else { current * self.gamma })
    }

    fn closed_form(&self, e: i64, _: usize, base: f64) -> Option<f64> {
        Some(base * powi(self.gamma, e.div_euclid(self.step_size as i64)))
    }
}

/// `torch.optim.lr_scheduler.MultiStepLR`: the lr times `gamma` at each milestone epoch
/// (a milestone listed twice counts twice).
pub type MultiStepLR = Scheduled<MultiStep>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiStep {
    pub milestones: Vec<u64>,
    pub gamma: f64,
}

impl MultiStepLR {
    pub fn new(optimizer: &mut dyn Optimizer, mut milestones: Vec<u64>, gamma: f64) -> Result<MultiStepLR> {
        milestones.sort_unstable();
        Scheduled::start(optimizer, MultiStep { milestones, gamma })
    }
}

impl Schedule for MultiStep {
    const NAME: &'static str = "MultiStepLR";

    fn lr(&self, ctx: &Ctx, _: usize, current: f64, _: f64) -> Result<f64> {
        let hits = self.milestones.iter().filter(|&&m| m as i64 == ctx.last_epoch).count();
        Ok(if hits == 0 { current } else { current * powi(self.gamma, hits as i64) })
    }

    fn closed_form(&self, e: i64, _: usize, base: f64) -> Option<f64> {
        let passed = self.milestones.iter().filter(|&&m| m as i64 <= e).count();
        Some(base * powi(self.gamma, passed as i64))
    }
}

/// `torch.optim.lr_scheduler.ExponentialLR`: the lr times `gamma` every epoch.
pub type ExponentialLR = Scheduled<Exponential>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exponential {
    pub gamma: f64,
}

impl ExponentialLR {
    pub fn new(optimizer: &mut dyn Optimizer, gamma: f64) -> Result<ExponentialLR> {
        Scheduled::start(optimizer, Exponential { gamma })
    }
}

impl Schedule for Exponential {
    const NAME: &'static str = "ExponentialLR";

    fn lr(&self, ctx: &Ctx, _: usize, current: f64, _: f64) -> Result<f64> {
        Ok(if ctx.is_initial { current } else { current * self.gamma })
    }

    fn closed_form(&self, e: i64, _: usize, base: f64) -> Option<f64> {
        Some(base * powi(self.gamma, e))
    }
}

/// `torch.optim.lr_scheduler.CosineAnnealingLR`: half a cosine from the base lr down to
/// `eta_min` over `t_max` epochs (and back up after, as PyTorch's recursive form does).
pub type CosineAnnealingLR = Scheduled<CosineAnnealing>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CosineAnnealing {
    pub t_max: u64,
    pub eta_min: f64,
}

impl CosineAnnealingLR {
    pub fn new(optimizer: &mut dyn Optimizer, t_max: u64, eta_min: f64) -> Result<CosineAnnealingLR> {
        if t_max == 0 {
            return Err(invalid("CosineAnnealingLR", "t_max must be at least 1".into()));
        }
        Scheduled::start(optimizer, CosineAnnealing { t_max, eta_min })
    }
}

impl Schedule for CosineAnnealing {
    const NAME: &'static str = "CosineAnnealingLR";

    fn lr(&self, ctx: &Ctx, _: usize, current: f64, base: f64) -> Result<f64> {
        let (e, t, min) = (ctx.last_epoch, self.t_max as i64, self.eta_min);
        let tf = t as f64;
        Ok(if ctx.is_initial {
            current
        } else if ctx.step_count == 1 && e > 0 {
            min + (base - min) * (1.0 + (e as f64 * PI / tf).cos()) / 2.0
        } else if (e - 1 - t).rem_euclid(2 * t) == 0 {
            current + (base - min) * (1.0 - (PI / tf).cos()) / 2.0
        } else {
            (1.0 + (PI * e as f64 / tf).cos()) / (1.0 + (PI * (e - 1) as f64 / tf).cos()) * (current - min) + min
        })
    }

    fn closed_form(&self, e: i64, _: usize, base: f64) -> Option<f64> {
        let min = self.eta_min;
        Some(min + (base - min) * (1.0 + (PI * e as f64 / self.t_max as f64).cos()) / 2.0)
    }
}

/// `torch.optim.lr_scheduler.LinearLR`: warm-up from `start_factor` times the base lr to
/// `end_factor` times it over `total_iters` epochs.
pub type LinearLR = Scheduled<Linear>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    pub start_factor: f64,
    pub end_factor: f64,
    pub total_iters: u64,
}

impl LinearLR {
    /// PyTorch's defaults are `start_factor` 1/3, `end_factor` 1.0, `total_iters` 5.
    pub fn new(optimizer: &mut dyn Optimizer, start_factor: f64, end_factor: f64, total_iters: u64) -> Result<LinearLR> {
        if !(start_factor > 0.0 && start_factor <= 1.0) {
            return Err(invalid("LinearLR", format!("start_factor {start_factor} must lie in (0, 1]")));
        }
        if !(0.0..=1.0).contains(&end_factor) {
            return Err(invalid("LinearLR", format!("end_factor {end_factor} must lie in [0, 1]")));
        }
        if total_iters == 0 {
            return Err(invalid("LinearLR", "total_iters must be at least 1".into()));
        }
        Scheduled::start(optimizer, Linear { start_factor, end_factor, total_iters })
    }
}

impl Schedule for Linear {
    const NAME: &'static str = "LinearLR";

    fn lr(&self, ctx: &Ctx, _: usize, current: f64, _: f64) -> Result<f64> {
        let (e, total) = (ctx.last_epoch, self.total_iters as i64);
        let (start, end) = (self.start_factor, self.end_factor);
        Ok(if e == 0 {
            current * start
        } else if ctx.is_initial || e > total {
            current
        } else {
            current * (1.0 + (end - start) / (total as f64 * start + (e - 1) as f64 * (end - start)))
        })
    }

    fn closed_form(&self, e: i64, _: usize, base: f64) -> Option<f64> {
        let total = self.total_iters as i64;
        Some(base * (self.start_factor + (self.end_factor - self.start_factor) * total.min(e) as f64 / total as f64))
    }
}

/// How OneCycleLR moves between two learning rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Anneal {
    Cos,
    Linear,
}

/// `torch.optim.lr_scheduler.OneCycleLR`, stepped once per batch: up from `max_lr /
/// div_factor` to `max_lr` over `pct_start` of `total_steps`, then down to the initial lr
/// over `final_div_factor`. Momentum is not cycled (PyTorch's `cycle_momentum=False`).
pub type OneCycleLR = Scheduled<OneCycle>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OneCycle {
    /// One per group, or one for all.
    pub max_lr: Vec<f64>,
    pub total_steps: u64,
    pub pct_start: f64,
    pub anneal_strategy: Anneal,
    pub div_factor: f64,
    pub final_div_factor: f64,
    pub three_phase: bool,
}

impl OneCycle {
    /// PyTorch's defaults: `pct_start` 0.3, cosine, `div_factor` 25, `final_div_factor` 1e4.
    pub fn new(max_lr: f64, total_steps: u64) -> OneCycle {
        OneCycle {
            max_lr: vec![max_lr],
            total_steps,
            pct_start: 0.3,
            anneal_strategy: Anneal::Cos,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
        }
    }

    /// The phases as `(end_step, start lr, end lr)` for one group.
    fn phases(&self, max_lr: f64) -> Vec<(f64, f64, f64)> {
        let initial = max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        let total = self.total_steps as f64;
        let last = (self.total_steps - 1) as f64;
        if self.three_phase {
            vec![(self.pct_start * total - 1.0, initial, max_lr), (2.0 * self.pct_start * total - 2.0, max_lr, initial), (last, initial, min)]
        } else {
            vec![(self.pct_start * total - 1.0, initial, max_lr), (last, max_lr, min)]
        }
    }
}

impl OneCycleLR {
    pub fn new(optimizer: &mut dyn Optimizer, schedule: OneCycle) -> Result<OneCycleLR> {
        if schedule.total_steps == 0 {
            return Err(invalid("OneCycleLR", "total_steps must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&schedule.pct_start) {
            return Err(invalid("OneCycleLR", format!("pct_start {} must lie in [0, 1]", schedule.pct_start)));
        }
        Scheduled::start(optimizer, schedule)
    }
}

impl Schedule for OneCycle {
    const NAME: &'static str = "OneCycleLR";

    fn lr(&self, ctx: &Ctx, group: usize, _: f64, _: f64) -> Result<f64> {
        let step = ctx.last_epoch;
        if step > self.total_steps as i64 {
            return Err(invalid("OneCycleLR", format!("stepped {step} times, but total_steps is {}", self.total_steps)));
        }
        let max_lr = self.max_lr.get(group).or(self.max_lr.first()).copied().unwrap_or(0.0);
        let phases = self.phases(max_lr);
        let step = step as f64;
        let mut start_step = 0.0;
        for (i, &(end_step, from, to)) in phases.iter().enumerate() {
            if step <= end_step || i == phases.len() - 1 {
                let pct = (step - start_step) / (end_step - start_step);
                return Ok(match self.anneal_strategy {
                    Anneal::Cos => to + (from - to) / 2.0 * ((PI * pct).cos() + 1.0),
                    Anneal::Linear => (to - from) * pct + from,
                });
            }
            start_step = end_step;
        }
        unreachable!("the last phase always matches")
    }

    fn base_lrs(&mut self, current: Vec<f64>) -> Result<Vec<f64>> {
        if self.max_lr.len() != 1 && self.max_lr.len() != current.len() {
            return Err(invalid(
                "OneCycleLR",
                format!("{} max_lr values for {} parameter groups; give one, or one per group", self.max_lr.len(), current.len()),
            ));
        }
        Ok((0..current.len()).map(|g| self.max_lr.get(g).or(self.max_lr.first()).copied().unwrap_or(0.0) / self.div_factor).collect())
    }
}
