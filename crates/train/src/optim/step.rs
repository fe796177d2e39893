//! The step every optimizer shares: [`Optimizer`] for [`Optim`] of any [`Rule`].

use std::borrow::Cow;

use liandan_tensor::NoGradGuard;

use super::core::{invalid, Optim, Rule};
use super::{Optimizer, OptimizerState, ParamGroup};
use crate::error::{Error, Result};

impl<R: Rule> Optimizer for Optim<R> {
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
            let done = match rule.fused() {
                Some(fused) => fused.0.run(group, states, &pending)?,
                None => vec![false; states.len()],
            };
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
