//! What every optimizer shares: parameter groups, per-parameter state, the step loop and the
//! checks. An optimizer is an [`Optim`] of its [`Rule`], the update of one parameter.

use std::borrow::Cow;

use liandan_tensor::{fused, FusedOp, NoGradGuard, Tensor};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{OptimizerState, ParamGroup};
use crate::error::{Error, Result};

/// The update rule of one optimizer and its hyper-parameters (`SgdConfig`, `AdamConfig`, ...).
///
/// `lr` and `weight_decay` are per group ([`ParamGroup`]); the config's values are the
/// defaults for parameters handed over without groups. Everything else is shared by all groups.
pub trait Rule: Clone + Send + Serialize + DeserializeOwned + 'static {
    /// The `torch.optim` class name, also the tag of saved state.
    const NAME: &'static str;

    /// The default learning rate.
    fn lr(&self) -> f64;

    /// The default weight decay.
    fn weight_decay(&self) -> f64;

    /// Rejects hyper-parameters outside their domain, naming them.
    fn validate(&self) -> Result<()>;

    /// The names of the state tensors [`Rule::update`] keeps per parameter, in order
    /// (`exp_avg`, `exp_avg_sq`, ...), as `torch.optim` names them.
    fn state_names(&self) -> Vec<&'static str>;

    /// The momentum a scheduler may cycle (SGD's and RMSprop's `momentum`, Adam's `betas.0`),
    /// or `None` for rules without one.
    fn momentum(&self) -> Option<f64> {
        None
    }

    /// This config with that momentum set to `momentum` (unchanged for rules without one).
    fn with_momentum(&self, _momentum: f64) -> Self {
        self.clone()
    }

    /// Updates `param` (through [`Tensor::assign`]) from `grad` and `state`, whose `step` has
    /// already been advanced, with tensor ops: the composite update, which the step runs where
    /// the device has no fused kernel for [`Rule::fused_step`]'s op, and the fused kernels'
    /// oracle. `state.tensors` is empty before the first update.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()>;

    /// The same update as a fused update op ([`FusedOp::updates`]) and the operands that follow
    /// `param` and `grad` (the state tensors, which become `state.tensors` once it has run), so
    /// that a step can hand a whole group's updates to the device at once
    /// ([`fused::update_foreach`]), or each to a per-tensor kernel ([`fused::update`]). It may
    /// create the state tensors; it updates nothing. `None` (the default) for a rule without a
    /// fused op: the step then calls [`Rule::update`].
    fn fused_step(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<Option<(FusedOp, Vec<Tensor>)>> {
        let _ = (lr, weight_decay, param, grad, state);
        Ok(None)
    }
}

/// One parameter's optimizer state: its step count (kept on the host, where it is known
/// without a read-back) and its tensors (on the parameter's device), named by
/// [`Rule::state_names`].
#[derive(Clone, Debug, Default)]
pub struct ParamState {
    pub step: u64,
    pub tensors: Vec<Tensor>,
}

/// The parameters an optimizer is built from: named tensors in one group (taking the config's
/// `lr` and `weight_decay`), or explicit groups.
pub enum Params {
    Named(Vec<(String, Tensor)>),
    Groups(Vec<ParamGroup>),
}

impl From<Vec<(String, Tensor)>> for Params {
    fn from(params: Vec<(String, Tensor)>) -> Params {
        Params::Named(params)
    }
}

impl From<Vec<ParamGroup>> for Params {
    fn from(groups: Vec<ParamGroup>) -> Params {
        Params::Groups(groups)
    }
}

/// An optimizer: the parameter groups, each parameter's state, and the rule that updates them.
/// Use it through its aliases ([`super::Sgd`], [`super::Adam`], ...) and the [`super::Optimizer`] trait.
pub struct Optim<R: Rule> {
    pub(crate) rule: R,
    pub(crate) groups: Vec<ParamGroup>,
    /// `state[g][i]` belongs to `groups[g].params[i]`.
    pub(crate) state: Vec<Vec<ParamState>>,
}

impl<R: Rule> Optim<R> {
    /// An optimizer over `params` (`model.named_parameters()`, or groups) with `config`.
    /// Errors name a hyper-parameter outside its domain, a parameter that is not floating
    /// point, or a parameter listed twice.
    pub fn new(params: impl Into<Params>, config: R) -> Result<Optim<R>> {
        config.validate()?;
        let groups = match params.into() {
            Params::Named(p) => vec![ParamGroup::new(p, config.lr(), config.weight_decay())],
            Params::Groups(g) => g,
        };
        let mut seen = std::collections::HashSet::new();
        for (i, g) in groups.iter().enumerate() {
            check_group_hyper(R::NAME, i, g.lr, g.weight_decay)?;
            for (name, t) in &g.params {
                if !t.dtype().is_float() {
                    return Err(invalid(R::NAME, format!("parameter `{name}` is {}, but only floating-point tensors can be optimized", t.dtype())));
                }
                if !seen.insert(name.clone()) {
                    return Err(invalid(R::NAME, format!("parameter `{name}` appears more than once; every parameter may be in one group only")));
                }
            }
        }
        let state = groups.iter().map(|g| vec![ParamState::default(); g.params.len()]).collect();
        Ok(Optim { rule: config, groups, state })
    }

    /// The shared hyper-parameters.
    pub fn config(&self) -> &R {
        &self.rule
    }

    /// The rule as group `group` runs it: the config, with the group's momentum where it has one.
    pub(crate) fn group_rule(&self, group: &ParamGroup) -> Cow<'_, R> {
        match group.momentum {
            Some(m) => Cow::Owned(self.rule.with_momentum(m)),
            None => Cow::Borrowed(&self.rule),
        }
    }

    /// The state of the parameter called `name`, if it is one of this optimizer's.
    pub fn param_state(&self, name: &str) -> Option<&ParamState> {
        self.groups.iter().zip(&self.state).find_map(|(g, s)| g.params.iter().position(|(n, _)| n == name).map(|i| &s[i]))
    }
}

pub(crate) fn invalid(op: &'static str, what: String) -> Error {
    Error::InvalidArgument { op, what }
}

fn check_group_hyper(op: &'static str, group: usize, lr: f64, weight_decay: f64) -> Result<()> {
    if !(lr.is_finite() && lr >= 0.0) {
        return Err(invalid(op, format!("group {group}: lr {lr} must be a finite number >= 0")));
    }
    if !(weight_decay.is_finite() && weight_decay >= 0.0) {
        return Err(invalid(op, format!("group {group}: weight_decay {weight_decay} must be a finite number >= 0")));
    }
    Ok(())
}

/// Checks that `value` lies in `[low, high)` (or `[low, high]` when `inclusive`), naming it.
pub(crate) fn check_range(op: &'static str, name: &str, value: f64, low: f64, high: f64, inclusive: bool) -> Result<()> {
    let ok = value >= low && (value < high || (inclusive && value == high));
    if ok {
        return Ok(());
    }
    let close = if inclusive { "]" } else { ")" };
    Err(invalid(op, format!("{name} {value} must lie in [{low}, {high}{close}")))
}

impl<R: Rule> super::Optimizer for Optim<R> {
    fn step(&mut self) -> Result<()> {
        // Updates are not part of any graph: recording them would keep every step's tensors alive.
        let _no_grad = NoGradGuard::new();
        for (group, states) in self.groups.iter().zip(self.state.iter_mut()) {
            let rule = match group.momentum {
                Some(m) => Cow::Owned(self.rule.with_momentum(m)),
                None => Cow::Borrowed(&self.rule),
            };
            // Every update of the group is checked and counted first, then run together where
            // the device can (PyTorch's foreach), and one by one where it cannot.
            let mut pending = Vec::with_capacity(group.params.len());
            for (i, ((name, param), state)) in group.params.iter().zip(states.iter_mut()).enumerate() {
                // As PyTorch: a parameter without a gradient is skipped, its state untouched.
                let Some(grad) = param.grad() else { continue };
                if grad.shape() != param.shape() || grad.dtype() != param.dtype() {
                    return Err(Error::State {
                        op: R::NAME,
                        detail: format!(
                            "the gradient of `{name}` is {:?} {} but the parameter is {:?} {}",
                            grad.shape(),
                            grad.dtype(),
                            param.shape(),
                            param.dtype()
                        ),
                    });
                }
                state.step += 1;
                pending.push((i, grad));
            }
            let done = run_fused(&*rule, group, states, &pending)?;
            for (i, grad) in &pending {
                if !done[*i] {
                    rule.update(group.lr, group.weight_decay, &group.params[*i].1, grad, &mut states[*i])?;
                }
            }
        }
        Ok(())
    }

    fn zero_grad(&mut self) {
        for g in &self.groups {
            for (_, p) in &g.params {
                p.set_grad(None);
            }
        }
    }

    fn param_groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    fn set_lr(&mut self, group: usize, lr: f64) {
        if let Some(g) = self.groups.get_mut(group) {
            g.lr = lr;
        }
    }

    fn momentum(&self, group: usize) -> Option<f64> {
        self.groups.get(group).and_then(|g| self.group_rule(g).momentum())
    }

    fn set_momentum(&mut self, group: usize, momentum: f64) -> Result<()> {
        if self.rule.momentum().is_none() {
            return Err(invalid(R::NAME, "has no momentum or betas for a scheduler to set".into()));
        }
        self.rule.with_momentum(momentum).validate()?;
        if let Some(g) = self.groups.get_mut(group) {
            g.momentum = Some(momentum);
        }
        Ok(())
    }

    fn state_dict(&self) -> Result<OptimizerState> {
        super::state::save(self)
    }

    fn load_state_dict(&mut self, state: &OptimizerState) -> Result<()> {
        super::state::load(self, state)
    }
}

/// One update's parameter index in its group, and its operands (param, grad, state).
type Operands = (usize, Vec<Tensor>);

/// Runs the updates `pending` (`(index in the group, gradient)`) of `group` as fused update
/// ops where the device has them: as multi-tensor ops ([`fused::update_foreach`]), one call per
/// distinct op (the parameters of a group normally share one: same hyper-parameters and step),
/// then each update the device left as a per-tensor op ([`fused::update`]). Returns which
/// parameters were updated; the caller runs the composite ([`Rule::update`]) for the others.
fn run_fused<R: Rule>(rule: &R, group: &ParamGroup, states: &mut [ParamState], pending: &[(usize, Tensor)]) -> Result<Vec<bool>> {
    let mut done = vec![false; states.len()];
    let mut batches: Vec<(FusedOp, Vec<Operands>)> = Vec::new();
    for (i, grad) in pending {
        let param = &group.params[*i].1;
        let Some((op, held)) = rule.fused_step(group.lr, group.weight_decay, param, grad, &mut states[*i])? else {
            return Ok(done);
        };
        let operands: Vec<Tensor> = [param.clone(), grad.clone()].into_iter().chain(held).collect();
        match batches.iter_mut().find(|b| b.0 == op) {
            Some(batch) => batch.1.push((*i, operands)),
            None => batches.push((op, vec![(*i, operands)])),
        }
    }
    for (op, items) in batches {
        let lists: Vec<Vec<&Tensor>> = items.iter().map(|(_, operands)| operands.iter().collect()).collect();
        let ran = fused::update_foreach(&op, &lists)?;
        for (((i, operands), list), ran) in items.iter().zip(&lists).zip(ran) {
            let ran = ran || fused::update(&op, list).transpose()?.is_some();
            if ran {
                states[*i].tensors = operands[2..].to_vec();
                done[*i] = true;
            }
        }
    }
    Ok(done)
}

/// `grad`, negated when maximizing (every optimizer's `maximize` option).
pub(crate) fn signed(grad: &Tensor, maximize: bool) -> Result<Tensor> {
    Ok(if maximize { grad.neg()? } else { grad.clone() })
}

/// `grad + weight_decay * param` (L2 penalty folded into the gradient), or `grad` when 0.
pub(crate) fn l2(grad: Tensor, param: &Tensor, weight_decay: f64) -> Result<Tensor> {
    Ok(if weight_decay != 0.0 { grad.add(&param.mul_scalar(weight_decay)?)? } else { grad })
}

/// `torch.lerp(start, end, weight)` with PyTorch's two branches (the one that keeps the
/// rounding small for the weight's side).
pub(crate) fn lerp(start: &Tensor, end: &Tensor, weight: f64) -> Result<Tensor> {
    let diff = end.sub(start)?;
    Ok(if weight.abs() < 0.5 { start.add(&diff.mul_scalar(weight)?)? } else { end.sub(&diff.mul_scalar(1.0 - weight)?)? })
}

/// `avg * beta + value * a * b` (PyTorch's `mul_(beta).addcmul_(a, b, value=value)`).
pub(crate) fn decay_addcmul(avg: &Tensor, beta: f64, a: &Tensor, b: &Tensor, value: f64) -> Result<Tensor> {
    Ok(avg.mul_scalar(beta)?.add(&a.mul_scalar(value)?.mul(b)?)?)
}

/// Zeros shaped like `param`, detached: the usual fresh state tensor.
pub(crate) fn zeros_like(param: &Tensor) -> Result<Tensor> {
    Ok(param.zeros_like()?)
}
