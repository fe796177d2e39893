//! [`Trainer::fit`]: the epoch loop with read-backs once per log interval, early stopping,
//! checkpoints after every epoch, exact resume and a clean stop on request.

use std::path::Path;
use std::sync::atomic::Ordering;

use liandan_nn::{Layer, ModuleExt, Tensor};

use super::board::Board;
use super::config::{FitConfig, ProgressStyle, SchedulerStep};
use super::history::{round_significant, History};
use super::progress::{format_values, Progress};
use super::state::{self, RunShape, TrainState};
use super::step::Pending;
use super::{check_loader, Trainer};
use crate::amp::{GradScaler, GradScalerState, Precision};
use crate::data::DataLoader;
use crate::error::{Error, Result};

impl<M: Layer> Trainer<M> {
    /// Trains on `train` for `config.epochs` epochs, validating on `val` after each, and
    /// returns the history (including epochs of the run being resumed). See the module docs
    /// for the files written.
    ///
    /// On the CPU the epochs run on a thread of the kernels' own pool
    /// ([`liandan_backend_cpu::on_pool`]), so each kernel's work is shared with the thread that
    /// called it rather than handed over.
    pub fn fit(&mut self, train: &DataLoader, val: Option<&DataLoader>, config: &FitConfig) -> Result<History> {
        let device = self.device.clone();
        liandan_backend_cpu::on_pool_for(&device, || self.fit_here(train, val, config))
    }

    /// [`Trainer::fit`] on the calling thread.
    fn fit_here(&mut self, train: &DataLoader, val: Option<&DataLoader>, config: &FitConfig) -> Result<History> {
        config.check()?;
        check_loader("fit", train, &self.device)?;
        if let Some(val) = val {
            check_loader("fit (validation)", val, &self.device)?;
        }
        self.check_monitor(val.is_some(), config)?;
        let train = &self.train_shard(train)?;
        let root = self.is_root();
        let dir = config.checkpoint_dir.as_deref();
        if let (Some(dir), true) = (dir, root) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.into(), action: "create the checkpoint directory", source })?;
        }
        let last = dir.map(|d| d.join("last.safetensors"));
        let shape = RunShape {
            precision: config.precision,
            accumulate: config.accumulate,
            clip_grad_norm: config.clip_grad_norm,
            monitor: config.monitor.clone(),
            limit_batches: config.limit_batches,
            batch_size: train.batch_size(),
            train_samples: train.dataset().len(),
            val_samples: val.map(|v| v.dataset().len()),
        };
        let metadata = state::run_metadata(&config.settings, &config.metadata);
        let mut st = match (&last, config.resume) {
            (Some(path), true) => {
                let sched = self.scheduler.as_mut().map(|(s, _)| &mut **s);
                let st = state::load(path, &self.device, &mut self.model, &mut *self.optimizer, sched)?;
                if st.world_size != self.world() {
                    return Err(Error::State {
                        op: "resume",
                        detail: format!(
                            "{} was trained by {} rank(s) and this run has {}; resume with as many (`mpirun -n {}`), since each rank's share of the data depends on it",
                            path.display(),
                            st.world_size,
                            self.world(),
                            st.world_size
                        ),
                    });
                }
                if st.seed != config.seed {
                    return Err(Error::State {
                        op: "resume",
                        detail: format!("{} was trained with seed {}, not {}; resume with the same seed", path.display(), st.seed, config.seed),
                    });
                }
                let changed = st.shape.as_ref().map(|saved| saved.differences(&shape)).unwrap_or_default();
                if !changed.is_empty() {
                    return Err(Error::State {
                        op: "resume",
                        detail: format!(
                            "{} was saved by a run with {}; resume with that run's settings, or start a new run elsewhere",
                            path.display(),
                            changed.join(", ")
                        ),
                    });
                }
                for (m, s) in self.metrics.iter_mut().zip(&st.metric_states) {
                    m.load_state(s)?;
                }
                st
            }
            _ => TrainState::new(config.seed, self.world()),
        };
        st.shape = Some(shape);
        // After the resume checks, so that a refused resume leaves no empty event file; rank 0 alone writes one.
        self.board = if root { Board::open(config)? } else { None };
        if config.precision == Precision::F16 {
            let scaler = self.scaler.get_or_insert_with(GradScaler::new);
            if let Some(saved) = &st.scaler {
                scaler.load_state(saved)?;
            }
        }
        let steps = train.len().min(config.limit_batches.unwrap_or(usize::MAX));
        self.ddp_begin(train, val, config, steps)?;
        let mut progress = Progress::new(if root { config.progress } else { ProgressStyle::Quiet });
        while st.epoch < config.epochs {
            let epoch = st.epoch + 1; // 1-based for people
            for c in &mut self.callbacks {
                c.on_epoch_start(epoch)?;
            }
            progress.start_epoch(epoch, config.epochs, steps, st.batch);
            // Rounded for the history and the screen: 0.49, not 0.48999999999999994.
            let lr = round_significant(self.optimizer.param_groups().first().map_or(f64::NAN, |g| g.lr), 6);
            let interrupted = self.train_epoch(train, config, steps, &mut st, &mut progress)?;
            if let Some(scaler) = &mut self.scaler {
                // The last step's check, so that the scaler's state is the epoch's.
                scaler.settle()?;
            }
            if interrupted {
                st.elapsed += progress.elapsed();
                st.metric_states = self.metrics.iter().map(|m| m.state()).collect::<Result<_>>()?;
                if let (Some(path), true) = (&last, root) {
                    st.scaler = self.scaler_state(config)?;
                    state::save(path, &self.model, &*self.optimizer, self.scheduler.as_ref().map(|(s, _)| &**s), &st, &metadata)?;
                }
                self.board = None;
                return Err(Error::Interrupted { epoch, step: st.batch, saved: last.clone() });
            }
            let row = self.end_epoch(epoch, lr, val, &mut st, &progress)?;
            st.history.push(&row);
            let monitored = row.iter().find(|(n, _)| *n == config.monitor).map(|(_, v)| *v).expect("check_monitor saw this column");
            if let Some((s, SchedulerStep::Epoch)) = &mut self.scheduler {
                s.step(&mut *self.optimizer, Some(monitored))?;
            }
            let improved = st.best.is_none_or(|b| config.mode.improves(monitored, b));
            if improved {
                st.best = Some(monitored);
                st.bad_epochs = 0;
            } else {
                st.bad_epochs += 1;
            }
            let mut summary = format!("epoch {epoch}/{}  {}  lr {lr}  {:.1} s", config.epochs, format_values(&row[2..row.len() - 1]), row[row.len() - 1].1);
            if improved && dir.is_some() {
                summary.push_str("  (best so far, saved)");
            }
            (st.epoch, st.batch, st.loss_sum, st.loss_steps, st.samples, st.elapsed) = (epoch, 0, 0.0, 0, 0, 0.0);
            st.metric_states.clear();
            if let (Some(dir), Some(path), true) = (dir, &last, root) {
                if improved {
                    liandan_nn::checkpoint::save(dir.join("best.safetensors"), &self.model.state_dict(), (!metadata.is_empty()).then(|| metadata.clone()))?;
                }
                st.scaler = self.scaler_state(config)?;
                state::save(path, &self.model, &*self.optimizer, self.scheduler.as_ref().map(|(s, _)| &**s), &st, &metadata)?;
                write_history(&st.history, dir)?;
            }
            if let Some(board) = &mut self.board {
                let params = if board.wants_params() { self.model.named_parameters() } else { Vec::new() };
                board.epoch(st.global_step, &row, &params)?;
            }
            // After the files: a summary that cannot be printed (a closed pipe) loses nothing.
            progress.finish_epoch(&summary)?;
            if let Some(line) = self.reducer_report() {
                progress.println(&line)?;
            }
            for c in &mut self.callbacks {
                c.on_epoch_end(epoch, &row)?;
            }
            if config.patience.is_some_and(|p| st.bad_epochs >= p) {
                progress.println(&format!("early stop: `{}` has not improved for {} epochs", config.monitor, st.bad_epochs))?;
                break;
            }
        }
        self.board = None;
        for c in &mut self.callbacks {
            c.on_fit_end(&st.history)?;
        }
        Ok(st.history)
    }

    /// Runs the batches `st.batch..steps` of epoch `st.epoch`; `Ok(true)` when stopped on
    /// request after an optimizer step.
    fn train_epoch(&mut self, train: &DataLoader, config: &FitConfig, steps: usize, st: &mut TrainState, progress: &mut Progress) -> Result<bool> {
        self.model.train();
        let mut pending: Vec<Pending> = Vec::new();
        let mut seen = 0usize; // samples run this epoch by every rank together, for samples/s
        let mut batches = train.iter_from(st.epoch as u64, st.batch)?.take(steps - st.batch);
        while st.batch < steps {
            let (step, samples) = self.optimizer_step(&mut batches, config, steps, st)?;
            if step.is_empty() {
                break; // the loader ran dry early
            }
            pending.extend(step);
            st.samples += samples;
            seen += samples * self.world();
            // Every rank stops at the same step, or the others would wait for it.
            let interrupted = self.any_rank(config.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)));
            if pending.len() >= config.log_interval || st.batch == steps || interrupted {
                self.read_back(&mut pending, st, seen, progress)?;
            }
            if interrupted {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The one read-back of a log interval: every pending batch's loss and gradient check at
    /// once (stopping on NaN or infinities, except on steps the loss scaler skipped), then the
    /// metrics.
    fn read_back(&mut self, pending: &mut Vec<Pending>, st: &mut TrainState, seen: usize, progress: &mut Progress) -> Result<()> {
        let mut losses = Tensor::stack(&pending.iter().map(|p| &p.loss).collect::<Vec<_>>(), 0usize)?.to_vec_f64()?;
        if let Some(scaler) = &mut self.scaler {
            // The device's scale, and an error once every step overflows.
            scaler.settle()?;
        }
        self.mean_over_ranks(&mut losses);
        let checked: Vec<usize> = (0..pending.len()).filter(|&i| pending[i].grads.is_some()).collect();
        let gated: Vec<usize> = (0..pending.len()).filter(|&i| pending[i].scaler_flag.is_some()).collect();
        // The gradient checks and the scaler's, in one read.
        let wanted: Vec<&Tensor> =
            checked.iter().filter_map(|&i| pending[i].grads.as_ref()).chain(gated.iter().filter_map(|&i| pending[i].scaler_flag.as_ref())).collect();
        let mut flags = match wanted.is_empty() {
            true => Vec::new(),
            false => Tensor::stack(&wanted, 0usize)?.to_vec_f64()?,
        };
        let scaler_flags = flags.split_off(checked.len());
        let mut skipped: Vec<bool> = pending.iter().map(|p| p.skipped).collect();
        for (&i, f) in gated.iter().zip(scaler_flags) {
            skipped[i] |= f != 0.0;
        }
        pending.clear();
        let first = st.batch - losses.len();
        // The earlier of the first bad loss and the first bad gradient: after either, the
        // weights are broken and everything that follows is too.
        let bad_loss = (0..losses.len()).find(|&i| !losses[i].is_finite() && !skipped[i]);
        let bad_grad = flags.iter().position(|f| !f.is_finite()).map(|j| checked[j]);
        match (bad_loss, bad_grad) {
            (Some(i), g) if g.is_none_or(|g| i <= g) => return Err(Error::NonFinite { epoch: st.epoch + 1, step: first + i + 1, value: losses[i] }),
            (_, Some(g)) => return Err(Error::NonFiniteGrad { epoch: st.epoch + 1, step: first + g + 1 }),
            _ => {}
        }
        for c in &mut self.callbacks {
            c.on_losses(st.epoch + 1, st.global_step - losses.len() as u64, &losses)?;
        }
        let kept: Vec<f64> = losses.iter().zip(&skipped).filter(|(_, s)| !**s).map(|(l, _)| *l).collect();
        st.loss_sum += kept.iter().sum::<f64>();
        st.loss_steps += kept.len();
        let mut values = vec![("loss".to_string(), st.loss_sum / st.loss_steps.max(1) as f64)];
        values.extend(self.metric_values()?);
        if let Some(board) = &mut self.board {
            let lr = self.optimizer.param_groups().first().map_or(f64::NAN, |g| g.lr);
            board.interval(st.global_step - losses.len() as u64, &losses, &skipped, &values, lr, seen as f64 / progress.elapsed().max(1e-9))?;
        }
        progress.update(st.batch, seen, &values)
    }

    /// The epoch's history row: epoch, lr, training loss and metrics, validation loss and
    /// metrics, wall time.
    fn end_epoch(&mut self, epoch: usize, lr: f64, val: Option<&DataLoader>, st: &mut TrainState, progress: &Progress) -> Result<Vec<(String, f64)>> {
        let mut row = vec![("epoch".to_string(), epoch as f64), ("lr".to_string(), lr)];
        row.push(("loss".to_string(), if st.loss_steps > 0 { st.loss_sum / st.loss_steps as f64 } else { f64::NAN }));
        row.extend(self.metric_values()?);
        for m in &mut self.metrics {
            m.reset();
        }
        if let Some(val) = val {
            for (name, v) in self.evaluate(val)? {
                row.push((format!("val_{name}"), v));
            }
        }
        row.push(("time_s".to_string(), st.elapsed + progress.elapsed()));
        Ok(row)
    }

    /// What `last` keeps of the loss scaler: its state in an f16 run, nothing otherwise.
    fn scaler_state(&mut self, config: &FitConfig) -> Result<Option<GradScalerState>> {
        match self.scaler.as_mut().filter(|_| config.precision == Precision::F16) {
            Some(scaler) => {
                scaler.settle()?;
                Ok(Some(scaler.state()))
            }
            None => Ok(None),
        }
    }

    /// The monitored column must be one the history will have.
    fn check_monitor(&self, has_val: bool, config: &FitConfig) -> Result<()> {
        let mut columns = vec!["loss".to_string()];
        columns.extend(self.metrics.iter().map(|m| m.name()));
        if has_val {
            columns.extend(columns.clone().into_iter().map(|c| format!("val_{c}")).collect::<Vec<_>>());
        }
        if columns.contains(&config.monitor) {
            return Ok(());
        }
        Err(Error::InvalidArgument { op: "fit", what: format!("cannot monitor `{}`: the history will have {}", config.monitor, columns.join(", ")) })
    }
}

/// `history.csv`, `history.json` and (with the feature `plot`) `history.png` in `dir`.
pub(crate) fn write_history(history: &History, dir: &Path) -> Result<()> {
    history.save(dir)?;
    #[cfg(feature = "plot")]
    super::plot::plot_history(history, &dir.join("history.png"))?;
    Ok(())
}
