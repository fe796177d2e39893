//! The full training state, `last.safetensors`: everything `fit` needs to continue exactly
//! where it stopped, in one file written atomically by `liandan_nn::checkpoint::save`.
//!
//! Tensors: the model's state dict under `model.` (`model.conv1.weight`) and the optimizer's
//! state under `optimizer.`. The safetensors metadata holds `TrainState` as JSON under
//! `liandan.train_state`: the optimizer's hyper-parameters, the scheduler's state, where the
//! data loader stands (epoch and batch), the step count, the seed the per-step random streams
//! derive from, the early-stopping state, the part of the epoch already run and the history.

use std::collections::HashMap;
use std::path::Path;

use liandan_nn::checkpoint;
use liandan_nn::{Device, Module, ModuleExt};
use serde::{Deserialize, Serialize};

use super::history::History;
use crate::amp::GradScalerState;
use crate::error::{Error, Result};
use crate::optim::{Optimizer, OptimizerState};
use crate::sched::LrScheduler;

/// The metadata key, and the format tag that tells our state files from other safetensors.
const KEY: &str = "liandan.train_state";
const FORMAT: &str = "liandan.train_state.v1";

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
}

impl TrainState {
    pub(crate) fn new(seed: u64) -> TrainState {
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
        }
    }
}

/// Writes model, optimizer, scheduler and `state` to `path` atomically.
pub(crate) fn save<M: Module>(path: &Path, model: &M, optimizer: &dyn Optimizer, scheduler: Option<&dyn LrScheduler>, state: &TrainState) -> Result<()> {
    let opt = optimizer.state_dict()?;
    let mut tensors: Vec<(String, liandan_nn::Tensor)> = model.state_dict().into_iter().map(|(n, t)| (format!("model.{n}"), t)).collect();
    tensors.extend(opt.tensors.into_iter().map(|(n, t)| (format!("optimizer.{n}"), t)));
    let mut state = state.clone();
    state.optimizer_hyper = opt.hyper;
    state.scheduler = scheduler.map(|s| s.state_dict());
    let json = serde_json::to_string(&state).expect("the training state serializes");
    checkpoint::save(path, &tensors, Some(HashMap::from([(KEY.to_string(), json)])))?;
    Ok(())
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
    let json = metadata.get(KEY).ok_or_else(|| {
        bad("not a training state written by liandan (no `liandan.train_state` metadata); a plain model checkpoint cannot be resumed from".into())
    })?;
    let state: TrainState = serde_json::from_str(json).map_err(|e| bad(format!("the training state does not parse ({e})")))?;
    if state.format != FORMAT {
        return Err(bad(format!("the training state has format `{}`, this liandan reads `{FORMAT}`", state.format)));
    }
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
    let report = checkpoint::load_state_dict(&model.state_dict(), model_tensors, true).map_err(|e| bad(format!("it was saved for another model: {e}")))?;
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
