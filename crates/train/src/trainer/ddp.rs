//! Data-parallel training inside [`Trainer::fit`](super::Trainer::fit): what changes when the
//! trainer has a [`Distributed`] job (see [`crate::distributed`]).
//!
//! Every rank runs `fit` with the same arguments. Before the first step the ranks check that
//! they agree (model and settings), take rank 0's weights, and build the gradient reducer;
//! each trains on its shard of every epoch; losses, metrics and validation are summed across
//! ranks, so every rank sees the same history and takes the same decisions (early stopping,
//! skipped f16 steps, a stop on Ctrl-C); rank 0 alone prints and writes files.

use liandan_nn::{Layer, TensorKind};

use super::config::FitConfig;
use super::Trainer;
use crate::data::DataLoader;
use crate::distributed::{describe_module, Distributed, ReduceOp, Reducer};
use crate::error::Result;

/// A trainer's part in a data-parallel job.
pub(crate) struct Ddp {
    pub dist: Distributed,
    pub reducer: Option<Reducer>,
}

impl<M: Layer> Trainer<M> {
    /// Trains data-parallel over `dist`'s ranks: every rank builds the same trainer (its model
    /// on [`Distributed::device_for`]) and calls [`Trainer::fit`] with the same loaders and
    /// config; `fit` shards the data, averages gradients across ranks before each optimizer
    /// step, and leaves printing and checkpoints to rank 0. BatchNorm normalizes each rank's
    /// batch with its own statistics, as DDP does; validation and checkpoints use rank 0's
    /// running statistics.
    pub fn with_distributed(mut self, dist: Distributed) -> Self {
        self.ddp = Some(Ddp { dist, reducer: None });
        self
    }

    /// The data-parallel job, if any.
    pub fn distributed(&self) -> Option<&Distributed> {
        self.ddp.as_ref().map(|d| &d.dist)
    }

    /// Whether this process prints and writes files: rank 0, or the only process.
    pub(crate) fn is_root(&self) -> bool {
        self.ddp.as_ref().is_none_or(|d| d.dist.is_root())
    }

    /// The number of ranks (1 without a job).
    pub(crate) fn world(&self) -> usize {
        self.ddp.as_ref().map_or(1, |d| d.dist.size())
    }

    /// Before the first step of a `fit`: checks that every rank runs the same model and
    /// settings, gives every rank rank 0's parameters and buffers, and builds the reducer.
    pub(crate) fn ddp_begin(&mut self, train: &DataLoader, val: Option<&DataLoader>, config: &FitConfig, steps: usize) -> Result<()> {
        let Some(ddp) = &self.ddp else { return Ok(()) };
        let dist = ddp.dist.clone();
        let mut entries = describe_module(&self.model);
        let lrs: Vec<f64> = self.optimizer.param_groups().iter().map(|g| g.lr).collect();
        let settings = [
            ("epochs", config.epochs.to_string()),
            ("batch size", train.batch_size().to_string()),
            ("training samples per rank", train.samples().to_string()),
            ("steps per epoch", steps.to_string()),
            ("validation samples", val.map_or(0, |v| v.dataset().len()).to_string()),
            ("batches per optimizer step", config.accumulate.to_string()),
            ("seed", config.seed.to_string()),
            ("precision", format!("{:?}", config.precision)),
            ("learning rates", format!("{lrs:?}")),
            ("parameters optimized", self.optimized_params().len().to_string()),
            ("resume", config.resume.to_string()),
        ];
        entries.extend(settings.into_iter().map(|(k, v)| (k.to_string(), v)));
        dist.check_same("models or settings", &entries)?;
        dist.broadcast_module(&self.model, &[TensorKind::Parameter, TensorKind::Buffer])?;
        let params = self.optimized_params();
        let ddp = self.ddp.as_mut().expect("checked above");
        if ddp.reducer.is_none() {
            ddp.reducer = Some(Reducer::new(&dist, &params)?);
        }
        Ok(())
    }

    /// This rank's shard of `loader` for training (equal shards, see [`DataLoader::shard`]),
    /// or `loader` itself without a job.
    pub(crate) fn train_shard(&self, loader: &DataLoader) -> Result<DataLoader> {
        match &self.ddp {
            Some(d) => loader.clone().shard(d.dist.rank(), d.dist.size()),
            None => Ok(loader.clone()),
        }
    }

    /// The reducer, in a data-parallel run.
    pub(crate) fn reducer(&mut self) -> Option<&mut Reducer> {
        self.ddp.as_mut().and_then(|d| d.reducer.as_mut())
    }

    /// Replaces this rank's per-batch losses by their mean over the ranks.
    pub(crate) fn mean_over_ranks(&self, values: &mut [f64]) {
        if let Some(d) = &self.ddp {
            d.dist.all_reduce_f64(values, ReduceOp::Mean);
        }
    }

    /// Whether `flag` is set on this rank or, in a job, on any rank.
    pub(crate) fn any_rank(&self, flag: bool) -> bool {
        match &self.ddp {
            Some(d) => d.dist.any(flag),
            None => flag,
        }
    }

    /// Every metric's value: over all ranks in a job (their states summed; a metric that keeps
    /// no state reports this rank's value).
    pub(crate) fn metric_values(&mut self) -> Result<Vec<(String, f64)>> {
        let Some(d) = &self.ddp else {
            return self.metrics.iter().map(|m| Ok((m.name(), m.compute()?))).collect();
        };
        let states: Vec<Vec<f64>> = self.metrics.iter().map(|m| m.state()).collect::<Result<_>>()?;
        let mut summed: Vec<f64> = states.concat();
        d.dist.all_reduce_f64(&mut summed, ReduceOp::Sum);
        let mut out = Vec::with_capacity(self.metrics.len());
        let mut at = 0;
        for (m, mine) in self.metrics.iter_mut().zip(&states) {
            if mine.is_empty() {
                out.push((m.name(), m.compute()?));
                continue;
            }
            m.load_state(&summed[at..at + mine.len()])?;
            out.push((m.name(), m.compute()?));
            m.load_state(mine)?;
            at += mine.len();
        }
        Ok(out)
    }

    /// Gives every rank rank 0's buffers (BatchNorm's running statistics), before they are
    /// evaluated or saved.
    pub(crate) fn sync_buffers(&self) -> Result<()> {
        match &self.ddp {
            Some(d) => d.dist.broadcast_module(&self.model, &[TensorKind::Buffer]),
            None => Ok(()),
        }
    }

    /// In a job, this rank's shard of an evaluation loader (every sample on one rank) and the
    /// sums to add up across ranks afterwards.
    pub(crate) fn eval_shard(&self, loader: &DataLoader) -> Result<DataLoader> {
        match &self.ddp {
            Some(d) => loader.clone().shard_all(d.dist.rank(), d.dist.size()),
            None => Ok(loader.clone()),
        }
    }

    /// `values` summed over the ranks (no-op without a job).
    pub(crate) fn sum_over_ranks(&self, values: &mut [f64]) {
        if let Some(d) = &self.ddp {
            d.dist.all_reduce_f64(values, ReduceOp::Sum);
        }
    }

    /// One line on the gradient all-reduce since the last one: its cost per step and how much
    /// of it backward hid (`None` without a job or before any step).
    pub(crate) fn reducer_report(&mut self) -> Option<String> {
        let world = self.world();
        let s = self.reducer()?.take_stats();
        if s.steps == 0 {
            return None;
        }
        let ms = |secs: f64| secs * 1e3 / s.steps as f64;
        Some(format!(
            "all-reduce over {world} ranks: {:.1} MB of gradients in {} bucket(s) per step; per step {:.2} ms all-reduce + {:.2} ms read-back, {:.2} ms of it waited for after backward ({:.0}% hidden behind backward), {:.2} ms upload",
            s.bytes as f64 / 1e6,
            s.buckets,
            ms(s.all_reduce_s),
            ms(s.read_s),
            ms(s.waited_s),
            s.hidden() * 100.0,
            ms(s.upload_s),
        ))
    }
}
