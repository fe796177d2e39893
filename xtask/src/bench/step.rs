//! What one child process of `cargo xtask bench` measures: a zoo model's full training step
//! (forward, loss, backward, the optimizer of MODEL_ZOO.md) synced and pipelined
//! (`xtask bench-model`), or a real epoch of it through the DataLoader (`xtask bench-epoch`).
//! Each runs in a fresh process so that one model's caches and pools do not favour the next.

use std::sync::Arc;
use std::time::Instant;

use liandan_nn::zoo::{self, OptimizerSpec, Target, ZooModel};
use liandan_nn::{Device, ModuleExt};
use liandan_tensor::{DType, Tensor};
use liandan_train::data::{DataLoader, Synthetic};
use liandan_train::optim::{Adadelta, AdadeltaConfig, Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use serde::{Deserialize, Serialize};

use super::args::{ChildArgs, Plan};

type Fallible<T> = Result<T, String>;

/// A precision a training step can run in: how its forward pass and loss are computed.
pub struct Precision {
    pub name: &'static str,
    pub forward: fn(&mut dyn FnMut() -> liandan_nn::error::Result<Tensor>) -> liandan_nn::error::Result<Tensor>,
}

/// The precisions this build supports. Mixed precision is one line each once autocast lands:
/// `Precision { name: "bf16", forward: |f| liandan_nn::autocast(DType::BF16, f) },`.
pub const PRECISIONS: &[Precision] = &[Precision { name: "f32", forward: |f| f() }];

pub fn precision(name: &str) -> Fallible<&'static Precision> {
    PRECISIONS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("unknown precision `{name}`: this build supports {}", PRECISIONS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")))
}

/// Median, fastest and slowest of a set of times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

impl Stats {
    /// From times in seconds; `None` when there are none.
    pub fn of(mut seconds: Vec<f64>) -> Option<Stats> {
        seconds.sort_by(f64::total_cmp);
        let median = *seconds.get(seconds.len() / 2)?;
        Some(Stats { median_ms: median * 1e3, min_ms: seconds[0] * 1e3, max_ms: seconds[seconds.len() - 1] * 1e3 })
    }
}

/// A model's training step on one device, as the child reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTimes {
    /// Each step followed by a synchronize.
    pub synced: Stats,
    /// Groups of `sync_every` steps with one synchronize at the end, per step.
    pub pipelined: Stats,
    /// The most memory the process held: device buffers on a GPU, heap bytes on the CPU.
    pub peak_bytes: Option<u64>,
}

/// A timed pass over a dataset, as `bench-epoch` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochTimes {
    pub samples: usize,
    pub steps: usize,
    pub seconds: f64,
}

/// A zoo model ready to step: the model, its optimizer, and a batch.
struct Setup {
    model: Box<dyn ZooModel>,
    opt: Box<dyn Optimizer>,
    precision: &'static Precision,
}

fn setup(name: &str, device: &Device, precision: &str) -> Fallible<Setup> {
    let s = |e: &dyn std::fmt::Display| e.to_string();
    let model = zoo::build(name, device).map_err(|e| s(&e))?;
    let params = model.named_parameters();
    let spec = model.spec();
    let opt: Box<dyn Optimizer> = match spec.optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay } => {
            Box::new(Sgd::new(params, SgdConfig { lr, momentum, weight_decay, ..SgdConfig::default() }).map_err(|e| s(&e))?)
        }
        OptimizerSpec::Adadelta { lr } => Box::new(Adadelta::new(params, AdadeltaConfig { lr, ..AdadeltaConfig::default() }).map_err(|e| s(&e))?),
        OptimizerSpec::Adam { lr } => Box::new(Adam::new(params, AdamConfig::adam(lr)).map_err(|e| s(&e))?),
        OptimizerSpec::AdamW { lr } => Box::new(Adam::new(params, AdamConfig::adamw(lr)).map_err(|e| s(&e))?),
    };
    Ok(Setup { model, opt, precision: self::precision(precision)? })
}

impl Setup {
    /// One training step on `(x, y)`; nothing is read back.
    fn step(&mut self, x: &Tensor, y: Option<&Tensor>) -> Fallible<()> {
        self.opt.zero_grad();
        let model = &self.model;
        let loss = (self.precision.forward)(&mut || model.loss(x, y)).map_err(|e| e.to_string())?;
        loss.backward().map_err(|e| e.to_string())?;
        self.opt.step().map_err(|e| e.to_string())
    }
}

/// Seeded inputs in `[0, 1)` of the model's shape at `batch` (the VAE's BCE needs them there),
/// and class labels for classifiers.
fn batch_for(model: &dyn ZooModel, batch: usize, device: &Device) -> Fallible<(Tensor, Option<Tensor>)> {
    let spec = model.spec();
    let mut shape = spec.input_shape.to_vec();
    shape[0] = batch;
    let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device).map_err(|e| e.to_string())?;
    let y = match spec.target {
        Target::Classes(k) => {
            Some(Tensor::from_vec((0..batch as i64).map(|i| i % k as i64).collect::<Vec<i64>>(), &[batch], device).map_err(|e| e.to_string())?)
        }
        Target::Reconstruction => None,
    };
    Ok((x, y))
}

/// `xtask bench-model`: times `plan` steps of the model synced, then pipelined.
pub fn time_steps(a: &ChildArgs) -> Fallible<StepTimes> {
    let device = Device::parse(&a.device).map_err(|e| e.to_string())?;
    let mut s = setup(&a.model, &device, &a.precision)?;
    let (x, y) = batch_for(&*s.model, a.batch, &device)?;
    let Plan { warmup, steps, sync_every, groups } = a.plan();
    let sync = || device.synchronize().map_err(|e| e.to_string());
    for _ in 0..warmup {
        s.step(&x, y.as_ref())?;
    }
    sync()?;
    let mut synced = Vec::new();
    for _ in 0..steps {
        let t = Instant::now();
        s.step(&x, y.as_ref())?;
        sync()?;
        synced.push(t.elapsed().as_secs_f64());
    }
    let mut pipelined = Vec::new();
    for _ in 0..groups {
        let t = Instant::now();
        for _ in 0..sync_every {
            s.step(&x, y.as_ref())?;
        }
        sync()?;
        pipelined.push(t.elapsed().as_secs_f64() / sync_every as f64);
    }
    let none = || "no timed steps".to_string();
    Ok(StepTimes { synced: Stats::of(synced).ok_or_else(none)?, pipelined: Stats::of(pipelined).ok_or_else(none)?, peak_bytes: peak_bytes(&device) })
}

/// Device buffers on a GPU; on the CPU, the heap this process held (the tensors live there).
fn peak_bytes(device: &Device) -> Option<u64> {
    match device.memory_stats() {
        Some(m) => Some(m.peak),
        None if device.is_cpu() => Some(crate::data::peak_heap_bytes()),
        None => None,
    }
}

/// `xtask bench-epoch`: one epoch of the model over `samples` synthetic samples of its input
/// shape, batched and uploaded by the DataLoader, with one synchronize at the end (the loss is
/// not read back, as the Trainer reads it once per log interval).
pub fn time_epoch(a: &ChildArgs) -> Fallible<EpochTimes> {
    let device = Device::parse(&a.device).map_err(|e| e.to_string())?;
    let mut s = setup(&a.model, &device, &a.precision)?;
    let spec = s.model.spec();
    let classes = match spec.target {
        Target::Classes(k) => k,
        Target::Reconstruction => return Err(format!("{} is not a classifier; the epoch benchmark trains classifiers", spec.name)),
    };
    let data = Synthetic::new(a.samples, &spec.input_shape[1..], classes, 5).map_err(|e| e.to_string())?;
    let loader = DataLoader::new(Arc::new(data), a.batch, &device).map_err(|e| e.to_string())?.shuffle(1);
    // Shaders compile and pools fill once per process, not once per epoch: warm up first.
    let (x, y) = batch_for(&*s.model, a.batch, &device)?;
    for _ in 0..a.warmup.max(1) {
        s.step(&x, y.as_ref())?;
    }
    device.synchronize().map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mut steps = 0;
    for batch in loader.iter(0).map_err(|e| e.to_string())? {
        let b = batch.map_err(|e| e.to_string())?;
        s.step(&b.input, Some(&b.target))?;
        steps += 1;
    }
    device.synchronize().map_err(|e| e.to_string())?;
    Ok(EpochTimes { samples: a.samples, steps, seconds: t.elapsed().as_secs_f64() })
}
