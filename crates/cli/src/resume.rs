//! What a training run is started with, kept in its checkpoints (`FitConfig::settings`), and
//! how `train --resume` takes it back: a flag left out takes the saved run's value, a flag that
//! contradicts the saved run is an error naming both values. `--epochs` and `--patience` may
//! change on a resume; so may what does not change the numbers (device, logging).

use std::collections::BTreeMap;
use std::path::Path;

use liandan_nn::zoo::{self, OptimizerSpec, ZooSpec};
use liandan_train::amp::Precision;

use crate::args::{OwnDataArgs, TrainArgs};
use crate::common::{default_data, default_epochs, default_monitor};
use crate::Failure;

/// Settings a resume may change.
const MAY_CHANGE: [&str; 2] = ["epochs", "patience"];

/// Everything a run is started with, resolved from the flags, the model's defaults and, on a
/// resume, the saved run.
#[derive(Debug)]
pub struct Settings {
    pub model: &'static ZooSpec,
    pub data: String,
    /// How the user's own data is read: a table's target column, an image folder's given
    /// normalization.
    pub own: OwnDataArgs,
    pub max_samples: Option<usize>,
    pub batch_size: usize,
    pub optimizer: String,
    pub lr: f64,
    /// `none`, `step:GAMMA`, `exponential:GAMMA` or `cosine`.
    pub scheduler: String,
    pub precision: Precision,
    pub accumulate: usize,
    pub clip_grad_norm: Option<f64>,
    pub monitor: String,
    pub seed: u64,
    pub limit_batches: Option<usize>,
    pub epochs: usize,
    pub patience: Option<usize>,
}

impl Settings {
    /// The settings as the checkpoints keep them, one string per flag (by its field name).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "none".into());
        [
            ("model", self.model.name.to_string()),
            ("data", self.data.clone()),
            ("target", opt(self.own.target.clone())),
            ("mean", opt(self.own.mean.clone())),
            ("std", opt(self.own.std.clone())),
            ("max_samples", opt(self.max_samples.map(|n| n.to_string()))),
            ("batch_size", self.batch_size.to_string()),
            ("optimizer", self.optimizer.clone()),
            ("lr", self.lr.to_string()),
            ("scheduler", self.scheduler.clone()),
            ("precision", self.precision.to_string()),
            ("accumulate", self.accumulate.to_string()),
            ("clip_grad_norm", opt(self.clip_grad_norm.map(|c| c.to_string()))),
            ("monitor", self.monitor.clone()),
            ("seed", self.seed.to_string()),
            ("limit_batches", opt(self.limit_batches.map(|n| n.to_string()))),
            ("epochs", self.epochs.to_string()),
            ("patience", opt(self.patience.map(|n| n.to_string()))),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// The run's settings: the flags and the model's defaults, and on a resume (`saved` holds the
/// run's settings) the saved values for every flag left out. `given` names the flags given on
/// the command line; `dir` is the run's directory, for messages.
pub fn resolve(a: &TrainArgs, given: &[String], saved: Option<&BTreeMap<String, String>>, dir: &Path) -> Result<Settings, Failure> {
    let given = |flag: &str| given.iter().any(|g| g == flag);
    let empty = BTreeMap::new();
    let saved = saved.unwrap_or(&empty);
    // One setting: the flag's value when given (checked against the saved run's), else the
    // saved run's, else the default.
    let pick = |key: &str, flag: Option<String>, default: String| -> Result<String, Failure> {
        match (flag.filter(|_| given(key)), saved.get(key)) {
            (Some(v), Some(s)) if &v != s && !MAY_CHANGE.contains(&key) => Err(contradiction(key, &v, s, dir)),
            (Some(v), _) => Ok(v),
            (None, Some(s)) => Ok(s.clone()),
            (None, None) => Ok(default),
        }
    };
    let model = zoo::spec(&pick("model", Some(a.model.clone()), a.model.clone())?)?;
    let data = canonical_data(a.data.data.as_deref().unwrap_or(default_data(model)));
    let data = pick("data", Some(data.clone()), data)?;
    let monitor = a.monitor.clone().unwrap_or_else(|| default_monitor(model).to_string());
    let optimizer = pick("optimizer", a.optimizer.as_ref().map(|o| o.to_ascii_lowercase()), default_optimizer(model).into())?;
    let lr = match (a.lr, saved.get("lr")) {
        (Some(lr), _) if !(lr.is_finite() && lr > 0.0) => return Err(Failure::usage(format!("--lr {lr}: give a positive learning rate such as 0.01"))),
        (None, None) if optimizer != default_optimizer(model) => {
            return Err(Failure::usage(format!("--optimizer {optimizer} needs --lr (the model's default lr is for {})", default_optimizer(model))))
        }
        _ => pick("lr", a.lr.map(|lr| lr.to_string()), default_lr(model).to_string())?,
    };
    let scheduler =
        pick("scheduler", a.scheduler.as_deref().map(|s| canonical_scheduler(s, model)).transpose()?, canonical_scheduler(default_scheduler(model), model)?)?;
    let none = || "none".to_string();
    let text = |v: Option<String>| v.unwrap_or_else(none);
    let own = &a.data.own;
    let s = [
        ("target", pick("target", Some(text(own.target.clone())), none())?),
        ("mean", pick("mean", Some(text(own.mean.clone())), none())?),
        ("std", pick("std", Some(text(own.std.clone())), none())?),
        ("max_samples", pick("max_samples", Some(text(a.data.max_samples.map(|n| n.to_string()))), none())?),
        ("batch_size", pick("batch_size", a.batch_size.map(|b| b.to_string()), model.input_shape[0].to_string())?),
        ("precision", pick("precision", Some(a.precision.to_string()), a.precision.to_string())?),
        ("accumulate", pick("accumulate", Some(a.accumulate.to_string()), a.accumulate.to_string())?),
        ("clip_grad_norm", pick("clip_grad_norm", Some(text(a.clip_grad_norm.map(|c| c.to_string()))), none())?),
        ("monitor", pick("monitor", Some(monitor.clone()), monitor)?),
        ("seed", pick("seed", Some(a.seed.to_string()), a.seed.to_string())?),
        ("limit_batches", pick("limit_batches", Some(text(a.limit_batches.map(|n| n.to_string()))), none())?),
        ("epochs", pick("epochs", a.epochs.map(|n| n.to_string()), default_epochs(model).to_string())?),
        ("patience", pick("patience", Some(text(a.patience.map(|n| n.to_string()))), none())?),
    ];
    let get = |key: &str| s.iter().find(|(k, _)| *k == key).map_or("", |(_, v)| v.as_str());
    let unreadable = |key: &str| {
        Failure::usage(format!("{}: the saved run's {key} `{}` does not read back; start a new run", dir.join("last.safetensors").display(), get(key)))
    };
    let number = |key: &str| get(key).parse::<usize>().map_err(|_| unreadable(key));
    let maybe = |key: &str| if get(key) == "none" { Ok(None) } else { number(key).map(Some) };
    let optional = |key: &str| Some(get(key).to_string()).filter(|v| v != "none");
    Ok(Settings {
        model,
        data,
        own: OwnDataArgs { target: optional("target"), mean: optional("mean"), std: optional("std") },
        max_samples: maybe("max_samples")?,
        batch_size: number("batch_size")?,
        optimizer,
        lr: lr.parse().map_err(|_| unreadable("lr"))?,
        scheduler,
        precision: Precision::parse(get("precision")).map_err(|_| unreadable("precision"))?,
        accumulate: number("accumulate")?,
        clip_grad_norm: match get("clip_grad_norm") {
            "none" => None,
            c => Some(c.parse().map_err(|_| unreadable("clip_grad_norm"))?),
        },
        monitor: get("monitor").to_string(),
        seed: get("seed").parse().map_err(|_| unreadable("seed"))?,
        limit_batches: maybe("limit_batches")?,
        epochs: number("epochs")?,
        patience: maybe("patience")?,
    })
}

/// `--flag value` against the saved run's value.
fn contradiction(key: &str, given: &str, saved: &str, dir: &Path) -> Failure {
    let flag = key.replace('_', "-");
    Failure::usage(format!(
        "--{flag} {given} contradicts the run in {}, which was started with --{flag} {saved}; --resume continues a run as it was \
         started (only --epochs and --patience may change): leave --{flag} out, or start a new run with --overwrite or another --out",
        dir.display()
    ))
}

/// A dataset's name, or the full path of a directory or table, so that `d` and `./d` are one dataset.
fn canonical_data(data: &str) -> String {
    match data {
        "bundled" | "mnist" | "fashion-mnist" | "cifar10" => data.to_string(),
        dir => std::fs::canonicalize(dir).map_or_else(|_| dir.to_string(), |p| p.display().to_string()),
    }
}

pub fn default_optimizer(spec: &ZooSpec) -> &'static str {
    match spec.optimizer {
        OptimizerSpec::Sgd { .. } => "sgd",
        OptimizerSpec::Adadelta { .. } => "adadelta",
        OptimizerSpec::Adam { .. } => "adam",
        OptimizerSpec::AdamW { .. } => "adamw",
    }
}

fn default_lr(spec: &ZooSpec) -> f64 {
    match spec.optimizer {
        OptimizerSpec::Sgd { lr, .. } | OptimizerSpec::Adadelta { lr } | OptimizerSpec::Adam { lr } | OptimizerSpec::AdamW { lr } => lr,
    }
}

fn default_scheduler(spec: &ZooSpec) -> &'static str {
    if spec.step_lr_gamma.is_some() {
        "step"
    } else {
        "none"
    }
}

/// `--scheduler` checked and written one way: `step` becomes `step:0.7` (the model's decay),
/// `step:0.70` becomes `step:0.7`.
fn canonical_scheduler(text: &str, spec: &ZooSpec) -> Result<String, Failure> {
    let (kind, arg) = text.split_once(':').map_or((text, None), |(k, a)| (k, Some(a)));
    let gamma = |default: Option<f64>, example: &str| -> Result<f64, Failure> {
        let bad = || Failure::usage(format!("--scheduler {text}: give the decay as a number in (0, 1], e.g. {example}"));
        match arg {
            Some(a) => a.parse::<f64>().ok().filter(|g| *g > 0.0 && *g <= 1.0).ok_or_else(bad),
            None => default.ok_or_else(bad),
        }
    };
    match kind {
        "none" | "cosine" if arg.is_none() => Ok(kind.to_string()),
        "step" => Ok(format!("step:{}", gamma(Some(spec.step_lr_gamma.unwrap_or(0.7)), "step:0.7")?)),
        "exponential" => Ok(format!("exponential:{}", gamma(None, "exponential:0.9")?)),
        _ => Err(Failure::usage(format!("unknown scheduler `{text}`: use none, step[:GAMMA], exponential:GAMMA or cosine"))),
    }
}
