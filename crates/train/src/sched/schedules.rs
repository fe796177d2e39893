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
/// over `final_div_factor`. With `cycle_momentum` (the default, as in PyTorch) the optimizer's
/// momentum moves the other way, from `max_momentum` down to `base_momentum` and back: SGD's
/// and RMSprop's `momentum`, Adam's and AdamW's `betas.0`.
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
    /// Cycle the optimizer's momentum inversely to the lr. (State saved before momentum
    /// cycling existed reads as `false`, which is what it did.)
    #[serde(default)]
    pub cycle_momentum: bool,
    /// The lowest momentum, reached where the lr peaks; one per group, or one for all.
    #[serde(default = "OneCycle::default_base_momentum")]
    pub base_momentum: Vec<f64>,
    /// The momentum at the start and the end; one per group, or one for all.
    #[serde(default = "OneCycle::default_max_momentum")]
    pub max_momentum: Vec<f64>,
}

impl OneCycle {
    /// PyTorch's defaults: `pct_start` 0.3, cosine, `div_factor` 25, `final_div_factor` 1e4,
    /// momentum cycled between 0.85 and 0.95.
    pub fn new(max_lr: f64, total_steps: u64) -> OneCycle {
        OneCycle {
            max_lr: vec![max_lr],
            total_steps,
            pct_start: 0.3,
            anneal_strategy: Anneal::Cos,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
            cycle_momentum: true,
            base_momentum: OneCycle::default_base_momentum(),
            max_momentum: OneCycle::default_max_momentum(),
        }
    }

    fn default_base_momentum() -> Vec<f64> {
        vec![0.85]
    }

    fn default_max_momentum() -> Vec<f64> {
        vec![0.95]
    }

    /// The steps at which the phases end.
    fn phase_ends(&self) -> Vec<f64> {
        let total = self.total_steps as f64;
        let last = (self.total_steps - 1) as f64;
        if self.three_phase {
            vec![self.pct_start * total - 1.0, 2.0 * self.pct_start * total - 2.0, last]
        } else {
            vec![self.pct_start * total - 1.0, last]
        }
    }

    /// The lr phases as `(start lr, end lr)` for one group.
    fn lr_phases(&self, max_lr: f64) -> Vec<(f64, f64)> {
        let initial = max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        if self.three_phase {
            vec![(initial, max_lr), (max_lr, initial), (initial, min)]
        } else {
            vec![(initial, max_lr), (max_lr, min)]
        }
    }

    /// The momentum phases as `(start, end)`: against the lr's, flat in the third phase.
    fn momentum_phases(&self, base: f64, max: f64) -> Vec<(f64, f64)> {
        if self.three_phase {
            vec![(max, base), (base, max), (max, max)]
        } else {
            vec![(max, base), (base, max)]
        }
    }

    /// The phase that `step` lies in and how far along it (PyTorch's loop in `get_lr`).
    fn position(&self, step: i64) -> Result<(usize, f64)> {
        if step > self.total_steps as i64 {
            return Err(invalid("OneCycleLR", format!("stepped {step} times, but total_steps is {}", self.total_steps)));
        }
        let ends = self.phase_ends();
        let step = step as f64;
        let mut start_step = 0.0;
        for (i, &end_step) in ends.iter().enumerate() {
            if step <= end_step || i == ends.len() - 1 {
                return Ok((i, (step - start_step) / (end_step - start_step)));
            }
            start_step = end_step;
        }
        unreachable!("the last phase always matches")
    }

    fn anneal(&self, (from, to): (f64, f64), pct: f64) -> f64 {
        match self.anneal_strategy {
            Anneal::Cos => to + (from - to) / 2.0 * ((PI * pct).cos() + 1.0),
            Anneal::Linear => (to - from) * pct + from,
        }
    }
}

/// `values[group]`, or the one value given for all groups.
fn per_group(values: &[f64], group: usize) -> f64 {
    values.get(group).or(values.first()).copied().unwrap_or(0.0)
}

/// Checks that `values` holds one value, or one per group, naming `what`.
fn check_per_group(what: &str, values: &[f64], groups: usize) -> Result<()> {
    if values.len() == 1 || values.len() == groups {
        return Ok(());
    }
    Err(invalid("OneCycleLR", format!("{} {what} values for {groups} parameter groups; give one, or one per group", values.len())))
}

impl OneCycleLR {
    pub fn new(optimizer: &mut dyn Optimizer, schedule: OneCycle) -> Result<OneCycleLR> {
        if schedule.total_steps == 0 {
            return Err(invalid("OneCycleLR", "total_steps must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&schedule.pct_start) {
            return Err(invalid("OneCycleLR", format!("pct_start {} must lie in [0, 1]", schedule.pct_start)));
        }
        if schedule.cycle_momentum {
            let groups = optimizer.param_groups().len();
            check_per_group("base_momentum", &schedule.base_momentum, groups)?;
            check_per_group("max_momentum", &schedule.max_momentum, groups)?;
            if (0..groups).any(|g| optimizer.momentum(g).is_none()) {
                return Err(invalid(
                    "OneCycleLR",
                    "cycle_momentum needs an optimizer with momentum or betas (SGD, RMSprop, Adam, AdamW); set cycle_momentum to false".into(),
                ));
            }
        }
        Scheduled::start(optimizer, schedule)
    }
}

impl Schedule for OneCycle {
    const NAME: &'static str = "OneCycleLR";

    fn lr(&self, ctx: &Ctx, group: usize, _: f64, _: f64) -> Result<f64> {
        let (phase, pct) = self.position(ctx.last_epoch)?;
        Ok(self.anneal(self.lr_phases(per_group(&self.max_lr, group))[phase], pct))
    }

    fn momentum(&self, ctx: &Ctx, group: usize) -> Result<Option<f64>> {
        if !self.cycle_momentum {
            return Ok(None);
        }
        let (phase, pct) = self.position(ctx.last_epoch)?;
        let phases = self.momentum_phases(per_group(&self.base_momentum, group), per_group(&self.max_momentum, group));
        Ok(Some(self.anneal(phases[phase], pct)))
    }

    fn base_lrs(&mut self, current: Vec<f64>) -> Result<Vec<f64>> {
        check_per_group("max_lr", &self.max_lr, current.len())?;
        Ok((0..current.len()).map(|g| per_group(&self.max_lr, g) / self.div_factor).collect())
    }
}
