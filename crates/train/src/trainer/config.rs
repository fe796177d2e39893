//! What [`Trainer::fit`](super::Trainer::fit) is asked to do: epochs, batching, early stopping,
//! checkpoints, logging, seeding and resuming.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::amp::Precision;
use crate::error::{Error, Result};

/// Whether a smaller or a larger value of the monitored metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    Min,
    Max,
}

impl Mode {
    /// The usual mode for a metric name: `Min` for losses (`val_loss`, `loss`), `Max` for
    /// everything else (accuracies).
    pub fn for_metric(name: &str) -> Mode {
        if name.ends_with("loss") {
            Mode::Min
        } else {
            Mode::Max
        }
    }

    /// Whether `new` improves on `best`. NaN never improves.
    pub fn improves(self, new: f64, best: f64) -> bool {
        match self {
            Mode::Min => new < best,
            Mode::Max => new > best,
        }
    }
}

/// How progress is shown while training.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressStyle {
    /// A progress bar when stdout is a terminal, plain lines otherwise.
    Auto,
    /// A progress bar (on stderr) whatever stdout is.
    Bar,
    /// Plain lines on stdout: a few per epoch and the epoch summary.
    Lines,
    /// Nothing but errors.
    Quiet,
}

/// When the learning-rate scheduler steps, as in PyTorch: once per epoch (`StepLR`) or once
/// per batch (`OneCycleLR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerStep {
    Epoch,
    Batch,
}

/// The options of [`Trainer::fit`](super::Trainer::fit) (torchkeras' `fit` arguments).
#[derive(Clone, Debug)]
pub struct FitConfig {
    /// Epochs to train in all (a resumed run continues up to this number).
    pub epochs: usize,
    /// Stop when the monitored metric has not improved for this many epochs.
    pub patience: Option<usize>,
    /// The history column that early stopping and `best.safetensors` follow: `val_loss`,
    /// `val_acc`, `loss`, or any metric's name (`val_` + name for its validation value).
    pub monitor: String,
    /// Whether smaller or larger `monitor` values are better.
    pub mode: Mode,
    /// Where `best.safetensors`, `last.safetensors` and the history go; nothing is written
    /// when `None`.
    pub checkpoint_dir: Option<PathBuf>,
    /// Steps between read-backs of the loss and metrics from the device (each read-back waits
    /// for the device's queue to drain).
    pub log_interval: usize,
    /// Seeds every random op of a step (dropout), so a run can be repeated and resumed
    /// exactly. (The data loader has its own seed for shuffling and augmentation.)
    pub seed: u64,
    /// Continue from `checkpoint_dir/last.safetensors` instead of starting afresh.
    pub resume: bool,
    /// Train on at most this many batches per epoch (quick trials and tests).
    pub limit_batches: Option<usize>,
    /// How progress is shown.
    pub progress: ProgressStyle,
    /// Set (by a Ctrl-C handler, say) to stop after the current step: `last` is written and
    /// `fit` returns [`Error::Interrupted`].
    pub stop: Option<Arc<AtomicBool>>,
    /// The type the forward pass computes in (mixed precision; see [`crate::amp`]). With
    /// `F16` a [`crate::amp::GradScaler`] scales the loss, and its state is saved in `last`.
    pub precision: Precision,
    /// Under `F16` or `BF16`: matmul, linear layers and convolutions of fewer operations stay
    /// in f32 (default `None`: the precision's own, [`Precision::min_ops`]; `Some(0)` lowers
    /// all, as `torch.autocast`).
    pub autocast_min_ops: Option<u64>,
    /// Batches per optimizer step (gradient accumulation): each batch's loss is divided by
    /// the number of batches in its step, so `N` batches of `B` update as one batch of `N*B`
    /// would. An epoch's last step may have fewer batches; it is divided by those.
    pub accumulate: usize,
    /// Scale the gradients to this global L2 norm at most before each step (after unscaling).
    pub clip_grad_norm: Option<f64>,
    /// On a non-finite loss or gradient, re-run the step op by op on the training device and
    /// on the CPU and name the first op that went wrong ([`crate::trainer::anomaly`]). Costs a
    /// read-back per step.
    pub detect_anomaly: bool,
    /// What the caller wants kept with the run (the command line keeps its model, data, batch
    /// size, optimizer and scheduler here): written into `best.safetensors` and
    /// `last.safetensors` (metadata `liandan.run`) and read back with
    /// [`state::saved_run`](super::state::saved_run) before a resume, or
    /// [`state::settings`](super::state::settings). `fit` does not interpret them.
    pub settings: BTreeMap<String, String>,
    /// Extra safetensors metadata for `best.safetensors` and `last.safetensors`, beside the
    /// settings: what the model needs to read new data, such as
    /// [`DataInfo::to_metadata`](crate::data::DataInfo::to_metadata)'s class names and
    /// normalization.
    pub metadata: HashMap<String, String>,
    /// Write TensorBoard event files while training (needs the `tensorboard` feature).
    pub tensorboard: Option<TensorBoardConfig>,
}

/// What [`Trainer::fit`](super::Trainer::fit) writes for TensorBoard, into a new event file in
/// `dir` each run: `train/loss` for every step; `train/acc` (each metric, its running mean
/// over the epoch), `train/lr` and `train/samples_per_sec` at every log interval; `val/loss`
/// and `val/acc` (each metric) after every epoch; and with `histograms`, every parameter's
/// values (`weights/<name>`) after every epoch. Steps count the batches trained so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorBoardConfig {
    pub dir: PathBuf,
    pub histograms: bool,
}

impl FitConfig {
    /// `epochs` epochs, monitoring `val_loss`, logging every 20 steps, seed 0, writing nothing.
    pub fn new(epochs: usize) -> FitConfig {
        FitConfig {
            epochs,
            patience: None,
            monitor: "val_loss".into(),
            mode: Mode::Min,
            checkpoint_dir: None,
            log_interval: 20,
            seed: 0,
            resume: false,
            limit_batches: None,
            progress: ProgressStyle::Auto,
            stop: None,
            precision: Precision::F32,
            autocast_min_ops: None,
            accumulate: 1,
            clip_grad_norm: None,
            detect_anomaly: false,
            settings: BTreeMap::new(),
            metadata: HashMap::new(),
            tensorboard: None,
        }
    }

    /// Refuses settings that cannot train.
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidArgument { op: "fit", what: what.to_string() });
        if self.log_interval == 0 {
            return bad("log_interval is 0; give a positive number of steps such as 20");
        }
        if self.limit_batches == Some(0) {
            return bad("limit_batches is 0; give a positive number of batches, or none for whole epochs");
        }
        if self.accumulate == 0 {
            return bad("accumulate is 0; give a positive number of batches per optimizer step such as 1");
        }
        if self.clip_grad_norm.is_some_and(|c| !(c > 0.0 && c.is_finite())) {
            return bad("clip_grad_norm must be a positive finite number");
        }
        if self.resume && self.checkpoint_dir.is_none() {
            return bad("resume needs a checkpoint directory to resume from");
        }
        Ok(())
    }
}
