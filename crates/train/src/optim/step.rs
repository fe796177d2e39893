//! The step every optimizer shares: [`Optimizer`] for [`Optim`] of any [`Rule`].

use liandan_tensor::{NoGradGuard, Tensor};

use super::core::{group_rule, invalid, Optim, Rule, Unsettled, COUNTED_UNSETTLED_STEPS, UNSETTLED_STEPS};
use super::{Optimizer, OptimizerState, ParamGroup};
use crate::error::{Error, Result};

impl<R: Rule> Optim<R> {
    /// Each parameter of group `g` that has a gradient, checked and its step counted:
    /// `(index in the group, gradient)`. As PyTorch, a parameter without a gradient is
    /// skipped, its state untouched.
    fn pending(&mut self, g: usize) -> Result<Vec<(usize, Tensor)>> {
        let (group, states) = (&self.groups[g], &mut self.state[g]);
        let mut pending = Vec::with_capacity(group.params.len());
        for (i, ((name, param), state)) in group.params.iter().zip(states.iter_mut()).enumerate() {
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
        Ok(pending)
    }

    /// Runs group `g`'s `pending` updates: together where the device can (PyTorch's foreach),
    /// one by one where it cannot.
    fn run(&mut self, g: usize, pending: &[(usize, Tensor)]) -> Result<()> {
        let (group, states) = (&self.groups[g], &mut self.state[g]);
        let rule = group_rule(&self.rule, group);
        let done = match rule.fused() {
            Some(fused) => fused.0.run(group, states, pending, None, None)?,
            None => vec![false; states.len()],
        };
        for (i, grad) in pending {
            if !done[*i] {
                rule.update(group.lr, group.weight_decay, &group.params[*i].1, grad, &mut states[*i])?;
            }
        }
        Ok(())
    }

    /// Takes back updates the device skipped: their step counts, and state made for them.
    fn take_back(&mut self, updates: &[(usize, usize, bool)]) {
        for &(g, i, made) in updates {
            let state = &mut self.state[g][i];
            state.step -= 1;
            if made {
                state.tensors.clear();
            }
        }
    }

    /// Reads whether the oldest gated steps were skipped, taking back those that were, until
    /// `keep` are left unread.
    fn settle_to(&mut self, keep: usize) -> Result<()> {
        while self.unsettled.len() > keep {
            let Some(u) = self.unsettled.pop_front() else { break };
            if u.read.to_vec_f64()?.first().is_some_and(|&f| f != 0.0) {
                self.take_back(&u.updates);
            }
        }
        Ok(())
    }

    /// Gated steps that may stay unread while the next one is recorded ([`UNSETTLED_STEPS`]).
    fn unsettled_kept(&self) -> usize {
        let made = self.unsettled.iter().any(|u| u.updates.iter().any(|x| x.2));
        if made {
            0
        } else if self.rule.reads_step_count() {
            COUNTED_UNSETTLED_STEPS
        } else {
            UNSETTLED_STEPS
        }
    }

    /// Whether every parameter of group `g` in `pending` was updated in the last gated step:
    /// its step count then includes that step, which the update recorded both ways takes back
    /// where the device skipped it.
    fn in_last_step(&self, g: usize, pending: &[(usize, Tensor)]) -> bool {
        self.unsettled.back().is_some_and(|u| pending.iter().all(|(i, _)| u.updates.iter().any(|x| x.0 == g && x.1 == *i)))
    }

    /// The updates of the gated steps the device skipped, read without settling (none when
    /// all are settled), a parameter once per skipped step: what a saved state leaves out.
    pub(crate) fn skipped_updates(&self) -> Result<Vec<(usize, usize, bool)>> {
        let mut skipped = Vec::new();
        for u in &self.unsettled {
            if u.flag.item_f64()? != 0.0 {
                skipped.extend(&u.updates);
            }
        }
        Ok(skipped)
    }
}

impl<R: Rule> Optimizer for Optim<R> {
    fn step(&mut self) -> Result<()> {
        self.settle_to(0)?;
        // Updates are not part of any graph: recording them would keep every step's tensors alive.
        let _no_grad = NoGradGuard::new();
        for g in 0..self.groups.len() {
            let pending = self.pending(g)?;
            self.run(g, &pending)?;
        }
        Ok(())
    }

    fn step_unless_nonfinite(&mut self, flag: &Tensor) -> Result<()> {
        self.settle_to(self.unsettled_kept())?;
        let _no_grad = NoGradGuard::new();
        // The last step's flag, where the rule reads step counts and its check is unread: the
        // updates are recorded for both of its outcomes.
        let mut last = if self.rule.reads_step_count() { self.unsettled.back().map(|u| u.flag.clone()) } else { None };
        // The flag, once something could not be gated and the host had to read it.
        let mut go: Option<bool> = None;
        let mut gated = Vec::new();
        for g in 0..self.groups.len() {
            let pending = self.pending(g)?;
            if last.is_some() && !self.in_last_step(g, &pending) {
                self.settle_to(0)?;
                last = None;
            }
            let group = &self.groups[g];
            let stateless = group_rule(&self.rule, group).state_names().is_empty();
            let made: Vec<bool> = pending.iter().map(|(i, _)| !stateless && self.state[g][*i].tensors.is_empty()).collect();
            let done = match group_rule(&self.rule, group).fused() {
                Some(fused) => fused.0.run(group, &mut self.state[g], &pending, Some(flag), last.as_ref())?,
                None => vec![false; group.params.len()],
            };
            let mut rest = Vec::new();
            for ((i, grad), made) in pending.into_iter().zip(made) {
                if done[i] {
                    gated.push((g, i, made));
                } else {
                    rest.push((i, grad, made));
                }
            }
            if rest.is_empty() {
                continue;
            }
            // The composite reads the host's step counts: the last step's check first.
            if last.is_some() {
                self.settle_to(0)?;
                last = None;
            }
            let go = match go {
                Some(go) => go,
                None => *go.insert(flag.item_f64()? == 0.0),
            };
            if go {
                self.run(g, &rest.into_iter().map(|(i, grad, _)| (i, grad)).collect::<Vec<_>>())?;
            } else {
                self.take_back(&rest.into_iter().map(|(i, _, made)| (g, i, made)).collect::<Vec<_>>());
            }
        }
        match go {
            _ if gated.is_empty() => {}
            Some(true) => {}
            Some(false) => self.take_back(&gated),
            None => {
                // A check read at the next step ends its batch, so that the read waits for this
                // step's work alone; one read steps later rides in its batch.
                let soon = gated.iter().any(|x| x.2) || self.unsettled_kept() == 0;
                let read = if soon { flag.read_later()? } else { flag.read_later_in_batch()? };
                self.unsettled.push_back(Unsettled { flag: flag.clone(), read, updates: gated });
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
        // A gated step still under way updates the buffers the loaded state replaces.
        self.unsettled.clear();
        super::state::load(self, state)
    }
}
