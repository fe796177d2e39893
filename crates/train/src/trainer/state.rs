//! The full training state, `last.safetensors`: everything `fit` needs to continue exactly
//! where it stopped, in one file written atomically by `liandan_nn::checkpoint::save`.
//!
//! Tensors: the model's state dict under `model.` (`model.conv1.weight`) and the optimizer's
//! state under `optimizer.`. The safetensors metadata holds `TrainState` as JSON under
//! `liandan.train_state`: the optimizer's hyper-parameters, the scheduler's state, where the
//! data loader stands (epoch and batch), the step count, the seed the per-step random streams
//! derive from, the early-stopping state, the part of the epoch already run, the history, and
//! what a resume must keep (precision, batch size, data sizes, ...). `liandan.run` holds the
//! caller's [`FitConfig::settings`](super::FitConfig::settings) as a JSON object, in
//! `best.safetensors` too; [`saved_run`] and [`settings`] read them back. The number of ranks
//! that trained it is kept too: a run resumes with as many.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use liandan_nn::checkpoint;
use liandan_nn::{Device, Module, ModuleExt};
use serde::{Deserialize, Serialize};

use super::history::History;
use crate::amp::{GradScalerState, Precision};
use crate::error::{Error, Result};
use crate::optim::{Optimizer, OptimizerState};
use crate::sched::LrScheduler;

/// The metadata key, and the format tag that tells our state files from other safetensors.
const KEY: &str = "liandan.train_state";
const FORMAT: &str = "liandan.train_state.v1";
/// The metadata key of the caller's settings.
pub const SETTINGS_KEY: &str = "liandan.run";

/// What besides tensors a resumed run needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct TrainState {
    pub format: String,
    /// The epoch (0-based) the loader stands in, and the next batch of it to run.
    pub epoch: usize,
    pub batch: usize,
    /// Optimizer steps taken since the run began.
    pub global_step: u64,
    /// The run's seed: the shuffle of each epoch and the random stream of each step derive
    /// from it, so these two numbers are the whole generator state.
    pub seed: u64,
    pub best: Option<f64>,
    pub bad_epochs: usize,
    /// The current epoch's training so far: loss sum and steps (read back), each metric's
    /// state, wall time.
    pub loss_sum: f64,
    pub loss_steps: usize,
    pub samples: usize,
    pub metric_states: Vec<Vec<f64>>,
    pub elapsed: f64,
    pub optimizer_hyper: serde_json::Value,
    pub scheduler: Option<serde_json::Value>,
    pub history: History,
    /// The f16 loss scaler's state (absent in files of f32 and bf16 runs, and of older ones).
    #[serde(default)]
    pub scaler: Option<GradScalerState>,
    /// What a resume must keep (absent in older files).
    #[serde(default)]
    pub shape: Option<RunShape>,
    /// The ranks of the data-parallel job (1 alone; absent in older files): each rank's share
    /// of an epoch depends on it, so a run resumes with as many.
    #[serde(default = "one")]
    pub world_size: usize,
}

fn one() -> usize {
    1
}

/// What a resumed run must share with the run it continues, or the two would not be one run
/// (a "best so far" on 640 validation samples against one on 2,000, say).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunShape {
    pub precision: Precision,
    pub accumulate: usize,
    pub clip_grad_norm: Option<f64>,
    pub monitor: String,
    pub limit_batches: Option<usize>,
    pub batch_size: usize,
    pub train_samples: usize,
    pub val_samples: Option<usize>,
}

impl RunShape {
    /// Each setting where `self` (the saved run) and `now` differ, as `name saved (now: x)`.
    pub(crate) fn differences(&self, now: &RunShape) -> Vec<String> {
        fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
            v.as_ref().map_or_else(|| "none".to_string(), |v| v.to_string())
        }
        let pairs = [
            ("precision", self.precision.to_string(), now.precision.to_string()),
            ("accumulate", self.accumulate.to_string(), now.accumulate.to_string()),
            ("clip_grad_norm", opt(&self.clip_grad_norm), opt(&now.clip_grad_norm)),
            ("monitor", self.monitor.clone(), now.monitor.clone()),
            ("limit_batches", opt(&self.limit_batches), opt(&now.limit_batches)),
            ("batch size", self.batch_size.to_string(), now.batch_size.to_string()),
            ("training samples", self.train_samples.to_string(), now.train_samples.to_string()),
            ("validation samples", opt(&self.val_samples), opt(&now.val_samples)),
        ];
        pairs.into_iter().filter(|(_, was, now)| was != now).map(|(name, was, now)| format!("{name} {was} (this run: {now})")).collect()
    }
}

impl TrainState {
    pub(crate) fn new(seed: u64, world_size: usize) -> TrainState {
        TrainState {
            format: FORMAT.into(),
            epoch: 0,
            batch: 0,
            global_step: 0,
            seed,
            best: None,
            bad_epochs: 0,
            loss_sum: 0.0,
            loss_steps: 0,
            samples: 0,
            metric_states: Vec::new(),
            elapsed: 0.0,
            optimizer_hyper: serde_json::Value::Null,
            scheduler: None,
            history: History::default(),
            scaler: None,
            shape: None,
            world_size,
        }
    }
}

/// Writes model, optimizer, scheduler, `state` and `metadata` (see [`run_metadata`]) to `path`
/// atomically.
pub(crate) fn save<M: Module>(
    path: &Path,
    model: &M,
    optimizer: &dyn Optimizer,
    scheduler: Option<&dyn LrScheduler>,
    state: &TrainState,
    metadata: &HashMap<String, String>,
) -> Result<()> {
    let opt = optimizer.state_dict()?;
    let mut tensors: Vec<(String, liandan_nn::Tensor)> = model.state_dict().into_iter().map(|(n, t)| (format!("model.{n}"), t)).collect();
    tensors.extend(opt.tensors.into_iter().map(|(n, t)| (format!("optimizer.{n}"), t)));
    let mut state = state.clone();
    state.optimizer_hyper = opt.hyper;
    state.scheduler = scheduler.map(|s| s.state_dict());
    let json = serde_json::to_string(&state).expect("the training state serializes");
    let mut metadata = metadata.clone();
    metadata.insert(KEY.to_string(), json);
    checkpoint::save(path, &tensors, Some(metadata))?;
    Ok(())
}

/// The metadata `fit` keeps beside the tensors of `best.safetensors` and `last.safetensors`:
/// the caller's entries ([`FitConfig::metadata`](super::FitConfig::metadata)) and its
/// `settings` under `liandan.run`.
pub(crate) fn run_metadata(settings: &BTreeMap<String, String>, extra: &HashMap<String, String>) -> HashMap<String, String> {
    let mut metadata = extra.clone();
    if !settings.is_empty() {
        metadata.insert(SETTINGS_KEY.to_string(), serde_json::to_string(settings).expect("a map of strings serializes"));
    }
    metadata
}

/// The settings a checkpoint of `fit` (`best.safetensors` or `last.safetensors`) was trained
/// with, from its metadata; empty for other files.
pub fn settings(metadata: &HashMap<String, String>) -> BTreeMap<String, String> {
    metadata.get(SETTINGS_KEY).and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default()
}

/// What a training state says about its run, read before anything is built for a resume.
#[derive(Clone, Debug)]
pub struct SavedRun {
    /// Epochs finished.
    pub epochs_done: usize,
    /// Batches already run of the epoch after those.
    pub batch: usize,
    pub seed: u64,
    /// Each parameter group's learning rate as the run will go on with it.
    pub lrs: Vec<f64>,
    /// The caller's settings ([`FitConfig::settings`](super::FitConfig::settings)).
    pub settings: BTreeMap<String, String>,
}

/// Reads what `path` (a `last.safetensors`) says about its run, without a model to load it into.
pub fn saved_run(path: &Path) -> Result<SavedRun> {
    let (_, metadata) = checkpoint::load_with_metadata(path, &Device::cpu())?;
    let state = parse(path, &metadata)?;
    let groups = state.optimizer_hyper.get("groups").and_then(|g| g.as_array()).cloned().unwrap_or_default();
    let lrs = groups.iter().filter_map(|g| g.get("lr").and_then(|lr| lr.as_f64())).collect();
    Ok(SavedRun { epochs_done: state.epoch, batch: state.batch, seed: state.seed, lrs, settings: settings(&metadata) })
}

/// The training state in a file's metadata, checked for our format.
fn parse(path: &Path, metadata: &HashMap<String, String>) -> Result<TrainState> {
    let bad = |detail: String| Error::State { op: "resume", detail: format!("{}: {detail}", path.display()) };
    let json = metadata.get(KEY).ok_or_else(|| {
        bad("not a training state written by liandan (no `liandan.train_state` metadata); a plain model checkpoint cannot be resumed from".into())
    })?;
    let state: TrainState = serde_json::from_str(json).map_err(|e| bad(format!("the training state does not parse ({e})")))?;
    if state.format != FORMAT {
        return Err(bad(format!("the training state has format `{}`, this liandan reads `{FORMAT}`", state.format)));
    }
    Ok(state)
}

/// A strict load's mismatch in a line: how many tensors are missing, unexpected or of another
/// shape, with the first few names. `None` for other errors.
pub fn describe_mismatch(e: &liandan_nn::Error) -> Option<String> {
    let liandan_nn::Error::StateDict { missing, unexpected, mismatched } = e else {
        return None;
    };
    let few = |keys: Vec<&str>| {
        let shown: Vec<String> = keys.iter().take(3).map(|k| format!("`{k}`")).collect();
        let more = if keys.len() > 3 { format!(" and {} more", keys.len() - 3) } else { String::new() };
        format!("{}{more}", shown.join(", "))
    };
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("{} of the model's tensors are not in the file ({})", missing.len(), few(missing.iter().map(String::as_str).collect())));
    }
    if !unexpected.is_empty() {
        parts.push(format!("{} of the file's tensors are not in the model ({})", unexpected.len(), few(unexpected.iter().map(String::as_str).collect())));
    }
    if !mismatched.is_empty() {
        let first = &mismatched[0];
        parts.push(format!(
            "{} tensor(s) differ in shape (`{}` is {:?} in the model, {:?} in the file)",
            mismatched.len(),
            first.key,
            first.expected,
            first.found
        ));
    }
    Some(parts.join("; "))
}

/// Reads `path` back into `model`, `optimizer` and `scheduler` (tensors onto `device`) and
/// returns the rest of the state. A file for another model, or not written by `fit`, is an
/// error that says so.
pub(crate) fn load<M: Module>(
    path: &Path,
    device: &Device,
    model: &mut M,
    optimizer: &mut dyn Optimizer,
    scheduler: Option<&mut (dyn LrScheduler + 'static)>,
) -> Result<TrainState> {
    let bad = |detail: String| Error::State { op: "resume", detail: format!("{}: {detail}", path.display()) };
    if !path.exists() {
        return Err(bad("there is no training state to resume from; train without resume first, or point at the directory of an earlier run".into()));
    }
    let (tensors, metadata) = checkpoint::load_with_metadata(path, device)?;
    let state = parse(path, &metadata)?;
    let (mut model_tensors, mut opt_tensors) = (Vec::new(), Vec::new());
    for (name, t) in tensors {
        if let Some(n) = name.strip_prefix("model.") {
            model_tensors.push((n.to_string(), t));
        } else if let Some(n) = name.strip_prefix("optimizer.") {
            opt_tensors.push((n.to_string(), t));
        } else {
            return Err(bad(format!("unexpected tensor `{name}` (neither `model.` nor `optimizer.`)")));
        }
    }
    let report = checkpoint::load_state_dict(&model.state_dict(), model_tensors, true).map_err(|e| {
        let which = settings(&metadata).get("model").map(|m| format!(" (`{m}`)")).unwrap_or_default();
        bad(format!("it was saved for another model{which}: {}", describe_mismatch(&e).unwrap_or_else(|| e.to_string())))
    })?;
    debug_assert!(report.is_complete());
    optimizer.load_state_dict(&OptimizerState { tensors: opt_tensors, hyper: state.optimizer_hyper.clone() })?;
    match (scheduler, &state.scheduler) {
        (Some(s), Some(saved)) => s.load_state_dict(saved)?,
        (None, None) => {}
        (Some(_), None) => return Err(bad("the run was saved without a learning-rate scheduler; resume it without one".into())),
        (None, Some(_)) => return Err(bad("the run was saved with a learning-rate scheduler; resume it with the same scheduler".into())),
    }
    Ok(state)
}
