//! One optimizer step of [`Trainer::fit`](super::Trainer::fit): the batches it accumulates,
//! each forward pass under the run's precision, the loss scaler, clipping, the gradient check
//! and the update.

use liandan_nn::{Layer, Tensor};

use super::config::{FitConfig, SchedulerStep};
use super::state::TrainState;
use super::Trainer;
use crate::amp::{nonfinite_flag, scaling_needed, Precision};
use crate::data::Batch;
use crate::error::{Error, Result};
use crate::optim::clip_grad_norm_;

/// The seed of the random stream of batch `step` of the run: every random op of a step
/// (dropout) draws from it, so a run resumed at any step draws what the uninterrupted run drew.
pub(crate) fn step_seed(seed: u64, step: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ step.wrapping_add(1).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// A batch's results not yet read back from the device.
pub(crate) struct Pending {
    /// The batch's loss (unscaled).
    pub loss: Tensor,
    /// For the last batch of an optimizer step: [`nonfinite_flag`] of its gradients, when they
    /// are checked at the next read-back (runs without a scaler).
    pub grads: Option<Tensor>,
    /// The scaler skipped this batch's step for an overflow: its loss may be infinite and is
    /// left out of the average.
    pub skipped: bool,
    /// The scaler's check of this batch's step where the device decided the skip: the step
    /// was skipped when it reads not zero (at the next read-back).
    pub scaler_flag: Option<Tensor>,
}

impl<M: Layer> Trainer<M> {
    /// The model's output and the loss for `batch`, under the run's autocast (`params` cast
    /// ahead of it: [`crate::amp::Precision::autocast_step`]).
    pub(crate) fn forward_loss(&mut self, batch: &Batch, config: &FitConfig, params: &[Tensor]) -> Result<(Tensor, Tensor)> {
        let _autocast = config.precision.autocast_step(config.autocast_min_ops, params)?;
        let out = self.model.forward(&batch.input)?;
        let loss = (self.loss)(&out, &batch.target)?;
        Ok((out, loss))
    }

    /// Every parameter the optimizer updates.
    pub(crate) fn optimized_params(&self) -> Vec<Tensor> {
        self.optimizer.param_groups().iter().flat_map(|g| g.params.iter().map(|(_, t)| t.clone())).collect()
    }

    /// Runs the batches of the optimizer step that batch `st.batch` belongs to (steps are
    /// counted from the epoch's first batch, `accumulate` batches each, the last one shorter),
    /// then updates the parameters. Returns each batch's [`Pending`] and the samples run.
    pub(crate) fn optimizer_step(
        &mut self,
        batches: &mut impl Iterator<Item = Result<Batch>>,
        config: &FitConfig,
        steps: usize,
        st: &mut TrainState,
    ) -> Result<(Vec<Pending>, usize)> {
        let start = st.batch / config.accumulate * config.accumulate;
        let end = (start + config.accumulate).min(steps);
        let share = 1.0 / (end - start) as f64;
        self.optimizer.zero_grad();
        let (mut pending, mut samples) = (Vec::new(), 0);
        let mut last = None;
        let params = self.optimized_params();
        // Whether the loss scaler runs this step, decided by its first batch (a later, smaller
        // batch lowers no more than it).
        let mut scaling = None;
        while st.batch < end {
            let Some(batch) = batches.next() else { break };
            let batch = batch?;
            liandan_nn::manual_seed(step_seed(st.seed, st.global_step));
            let mark = liandan_nn::autocast_lowered();
            let (out, loss) = self.forward_loss(&batch, config, &params)?;
            let scaling = *scaling.get_or_insert_with(|| scaling_needed(mark, &params));
            let scaled = if end - start > 1 { loss.mul_scalar(share)? } else { loss.clone() };
            // In a data-parallel run, the last batch's backward all-reduces the gradients as it
            // goes; the others only accumulate (DDP's `no_sync`).
            let last_batch = st.batch + 1 == end;
            if let Some(reducer) = self.reducer() {
                reducer.set_sync(last_batch);
            }
            match self.active_scaler(config).filter(|_| scaling) {
                Some(scaler) => scaler.backward(&scaled)?,
                None => scaled.backward()?,
            }
            let out = out.detach();
            for m in &mut self.metrics {
                m.update(&out, &batch.target)?;
            }
            pending.push(Pending { loss: loss.detach(), grads: None, skipped: false, scaler_flag: None });
            st.global_step += 1;
            st.batch += 1;
            samples += batch.target.shape()[0];
            last = Some(batch);
        }
        if let Some(reducer) = self.reducer() {
            reducer.finish()?;
        }
        match self.scaler.as_mut().filter(|_| config.precision == Precision::F16 && scaling == Some(true)) {
            // The skip decided on the device: nothing waits for the check.
            Some(scaler) if !config.detect_anomaly => {
                let flag = scaler.unscale_(&params)?;
                if let Some(max_norm) = config.clip_grad_norm {
                    clip_grad_norm_(&params, max_norm, 2.0)?;
                }
                scaler.step(&mut *self.optimizer, &flag)?;
                pending.iter_mut().for_each(|p| p.scaler_flag = Some(flag.clone()));
            }
            scaler => {
                let go = match scaler {
                    Some(scaler) => scaler.unscale_and_update(&params)?,
                    None => {
                        if let Some(p) = pending.last_mut() {
                            p.grads = nonfinite_flag(&params)?;
                        }
                        true
                    }
                };
                if !go {
                    pending.iter_mut().for_each(|p| p.skipped = true);
                } else {
                    if config.detect_anomaly {
                        self.check_step(&pending, last.as_ref(), config, st)?;
                    }
                    if let Some(max_norm) = config.clip_grad_norm {
                        clip_grad_norm_(&params, max_norm, 2.0)?;
                    }
                    self.optimizer.step()?;
                }
            }
        }
        if let Some((s, SchedulerStep::Batch)) = &mut self.scheduler {
            s.step(&mut *self.optimizer, None)?;
        }
        Ok((pending, samples))
    }

    /// The scaler, when this run trains in f16.
    fn active_scaler(&self, config: &FitConfig) -> Option<&crate::amp::GradScaler> {
        self.scaler.as_ref().filter(|_| config.precision == Precision::F16)
    }

    /// With `detect_anomaly`: reads this step's loss and gradient check now, and on a
    /// non-finite one re-runs the last batch op by op and stops with what it found.
    fn check_step(&mut self, pending: &[Pending], last: Option<&Batch>, config: &FitConfig, st: &TrainState) -> Result<()> {
        let Some(batch) = last else { return Ok(()) };
        let losses = Tensor::stack(&pending.iter().map(|p| &p.loss).collect::<Vec<_>>(), 0usize)?.to_vec_f64()?;
        let grads_ok = match pending.last().and_then(|p| p.grads.as_ref()) {
            Some(flag) => flag.item_f64()?.is_finite(),
            None => true,
        };
        if losses.iter().all(|l| l.is_finite()) && grads_ok {
            return Ok(());
        }
        // The same random stream as the step that failed (the last batch's).
        let seed = step_seed(st.seed, st.global_step - 1);
        let report = super::anomaly::diagnose(&mut self.model, &self.loss, batch, config, seed)?;
        Err(Error::Anomaly { epoch: st.epoch + 1, step: st.batch, report })
    }
}
