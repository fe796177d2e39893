//! What every optimizer shares: parameter groups, per-parameter state, the step loop and the
//! checks. An optimizer is an [`Optim`] of its [`Rule`], the update of one parameter.

use std::borrow::Cow;

use liandan_tensor::Tensor;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::ParamGroup;
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
    /// the device has no kernel for [`Rule::fused`]'s update, and the kernels' oracle.
    /// `state.tensors` is empty before the first update.
    fn update(&self, lr: f64, weight_decay: f64, param: &Tensor, grad: &Tensor, state: &mut ParamState) -> Result<()>;

    /// This rule's update as one kernel per parameter (or a few per group) where the device
    /// has them, checked against [`Rule::update`] as its composite (`optim/fused`): this
    /// crate's optimizers have one. `None` (the default): the step calls [`Rule::update`].
    fn fused(&self) -> Option<FusedUpdate<'_>> {
        None
    }

    /// Whether [`Rule::update`]'s arithmetic reads `state.step` (Adam's bias corrections).
    /// Where it does not, a step the device may skip ([`super::Optimizer::step_unless_nonfinite`])
    /// is counted before the host learns whether it was skipped, and nothing waits for that.
    /// `true` unless a rule says otherwise.
    fn reads_step_count(&self) -> bool {
        true
    }
}

/// The [`Rule`] methods every config of this crate has alike: `lr` and `weight_decay` are its
/// fields of those names, and its update is fused (`optim/fused`).
macro_rules! rule_defaults {
    () => {
        fn lr(&self) -> f64 {
            self.lr
        }

        fn weight_decay(&self) -> f64 {
            self.weight_decay
        }

        fn fused(&self) -> Option<$crate::optim::FusedUpdate<'_>> {
            Some($crate::optim::FusedUpdate(self))
        }
    };
}
pub(crate) use rule_defaults;

/// The handle of a rule's fused update, which the step runs ([`Rule::fused`]). Opaque: this
/// crate's optimizers have one (`optim/fused`).
pub struct FusedUpdate<'a>(pub(crate) &'a dyn RunGroup);

/// Runs a group's pending updates (`(index in the group, gradient)`) as fused ops where the
/// device has them, returning which parameters were updated (`optim/fused` implements it).
/// With `gate` (the loss scaler's flag), only those that the device can skip itself when the
/// flag is not zero; with `last` too (the last step's flag, not yet read, whose step each
/// pending parameter's count includes), each as the device finds that step: run, or skipped
/// and the count one less.
pub(crate) trait RunGroup {
    fn run(
        &self,
        group: &ParamGroup,
        states: &mut [ParamState],
        pending: &[(usize, Tensor)],
        gate: Option<&Tensor>,
        last: Option<&Tensor>,
    ) -> Result<Vec<bool>>;
}

/// Gated steps whose checks the host has not read, at most, before a gated step: with a rule
/// whose arithmetic ignores the step count ([`Rule::reads_step_count`]) and no state made in
/// them, the oldest check read is one the device finished long ago, and the host never waits on
/// the step before. With a rule that reads it, one ([`COUNTED_UNSETTLED_STEPS`]). After a
/// step that made state, 0: its check is read before the next step is recorded.
pub(crate) const UNSETTLED_STEPS: usize = 2;

/// [`UNSETTLED_STEPS`] for a rule that reads the step count (Adam's bias corrections): the
/// last step's check stays unread, and the next step is recorded for both of its outcomes
/// (the count as the host has it, and one less), the device running the one that holds.
pub(crate) const COUNTED_UNSETTLED_STEPS: usize = 1;

/// Updates recorded under a gate the host has not read yet ([`super::Optimizer::step_unless_nonfinite`]):
/// if the flag turns out not zero, the device skipped them, and their step counts (and state
/// made for them) are taken back when the optimizer looks ([`UNSETTLED_STEPS`]).
pub(crate) struct Unsettled {
    pub(crate) flag: Tensor,
    pub(crate) read: liandan_tensor::LaterRead,
    /// `(group, index in the group, whether its state was made for this step)`.
    pub(crate) updates: Vec<(usize, usize, bool)>,
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
    /// The last steps' updates the device decided whether to skip, oldest first.
    pub(crate) unsettled: std::collections::VecDeque<Unsettled>,
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
        Ok(Optim { rule: config, groups, state, unsettled: Default::default() })
    }

    /// The shared hyper-parameters.
    pub fn config(&self) -> &R {
        &self.rule
    }

    /// The rule as group `group` runs it: the config, with the group's momentum where it has one.
    pub(crate) fn group_rule(&self, group: &ParamGroup) -> Cow<'_, R> {
        group_rule(&self.rule, group)
    }

    /// The state of the parameter called `name`, if it is one of this optimizer's. After a
    /// step gated on the device, its count includes that step until the next step (or
    /// `state_dict`) learns whether it was skipped.
    pub fn param_state(&self, name: &str) -> Option<&ParamState> {
        self.groups.iter().zip(&self.state).find_map(|(g, s)| g.params.iter().position(|(n, _)| n == name).map(|i| &s[i]))
    }
}

/// `rule` as `group` runs it (see [`Optim::group_rule`]).
pub(crate) fn group_rule<'a, R: Rule>(rule: &'a R, group: &ParamGroup) -> Cow<'a, R> {
    match group.momentum {
        Some(m) => Cow::Owned(rule.with_momentum(m)),
        None => Cow::Borrowed(rule),
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

/// [`check_range`] of each `(name, value)` against `[0, inf)`.
pub(crate) fn non_negative(op: &'static str, values: &[(&str, f64)]) -> Result<()> {
    values.iter().try_for_each(|&(name, value)| check_range(op, name, value, 0.0, f64::INFINITY, false))
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
