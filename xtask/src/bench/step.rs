//! What one child process of `cargo xtask bench` measures: a zoo model's full training step
//! (forward, loss, backward, the optimizer of docs/MODEL_ZOO.md) synced and pipelined
//! (`xtask bench-model`), or a real epoch of it through the DataLoader (`xtask bench-epoch`).
//! Each runs in a fresh process so that one model's caches and pools do not favour the next.

use std::sync::Arc;
use std::time::Instant;

use liandan_backend_wgpu::testing::HostPhases;
use liandan_nn::zoo::{self, OptimizerSpec, Target, ZooModel};
use liandan_nn::{Device, ModuleExt};
use liandan_tensor::{DType, Tensor};
use liandan_train::amp::{scaling_needed, GradScaler, Precision};
use liandan_train::data::{DataLoader, Synthetic};
use liandan_train::optim::{Adadelta, AdadeltaConfig, Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use serde::{Deserialize, Serialize};

use super::args::{ChildArgs, Plan};

type Fallible<T> = Result<T, String>;

/// The precisions a training step can run in, as rows and `bench_torch.py` name them: f32, and
/// mixed precision (`liandan_train::amp`) in f16, with the dynamic loss scaler, and in bf16.
pub const PRECISIONS: &[&str] = &["f32", "f16", "bf16"];

pub fn precision(name: &str) -> Fallible<Precision> {
    match PRECISIONS.contains(&name) {
        true => Precision::parse(name).map_err(|e| e.to_string()),
        false => Err(format!("unknown precision `{name}`: use {}", PRECISIONS.join(", "))),
    }
}

/// Median, fastest and slowest of a set of times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

impl Stats {
    /// From times in seconds; `None` when there are none. The median of an even count is the
    /// mean of the middle two (of two groups, not the slower one).
    pub fn of(mut seconds: Vec<f64>) -> Option<Stats> {
        seconds.sort_by(f64::total_cmp);
        let n = seconds.len();
        let upper = *seconds.get(n / 2)?;
        let median = if n.is_multiple_of(2) { (seconds[n / 2 - 1] + upper) / 2.0 } else { upper };
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
    /// Seconds the first step took, synchronized: on a GPU ours compiles its kernels in it,
    /// PyTorch under `torch.compile` its graphs (absent from older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_step_s: Option<f64>,
    /// Where the pipelined steps spent the host's time ([`phase_line`]), with
    /// `LIANDAN_BENCH_PHASES=1`: the parent prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_phases: Option<String>,
}

impl StepTimes {
    /// One process's times from several (`bench --rounds`): each timing the median of their
    /// medians, between the least and the most of them; the largest peak; the first process's
    /// first step (the one that compiled the kernels). `None` for none.
    pub fn across(runs: &[StepTimes]) -> Option<StepTimes> {
        if let [one] = runs {
            return Some(one.clone());
        }
        let first = runs.first()?;
        let spread = |pick: fn(&StepTimes) -> f64| Stats::of(runs.iter().map(|r| pick(r) / 1e3).collect());
        Some(StepTimes {
            synced: spread(|t| t.synced.median_ms)?,
            pipelined: spread(|t| t.pipelined.median_ms)?,
            peak_bytes: runs.iter().filter_map(|r| r.peak_bytes).max(),
            first_step_s: first.first_step_s,
            host_phases: None,
        })
    }
}

/// A timed pass over a dataset, as `bench-epoch` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochTimes {
    pub samples: usize,
    pub steps: usize,
    pub seconds: f64,
}

/// A zoo model ready to step: the model, its optimizer, the precision and (in f16) the loss
/// scaler.
struct Setup {
    model: Box<dyn ZooModel>,
    params: Vec<Tensor>,
    opt: Box<dyn Optimizer>,
    precision: Precision,
    autocast_min_ops: Option<u64>,
    scaler: Option<GradScaler>,
}

fn setup(name: &str, device: &Device, precision: &str, autocast_min_ops: Option<u64>) -> Fallible<Setup> {
    let s = |e: &dyn std::fmt::Display| e.to_string();
    let model = zoo::build(name, device).map_err(|e| s(&e))?;
    let opt = zoo_optimizer(model.as_ref())?;
    let precision = self::precision(precision)?;
    let scaler = (precision == Precision::F16).then(GradScaler::new);
    Ok(Setup { params: model.parameters(), model, opt, precision, autocast_min_ops, scaler })
}

/// The optimizer docs/MODEL_ZOO.md gives `model`, over its named parameters.
pub fn zoo_optimizer(model: &dyn ZooModel) -> Fallible<Box<dyn Optimizer>> {
    let params = model.named_parameters();
    let s = |e: &dyn std::fmt::Display| e.to_string();
    Ok(match model.spec().optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay } => {
            Box::new(Sgd::new(params, SgdConfig { lr, momentum, weight_decay, ..SgdConfig::default() }).map_err(|e| s(&e))?)
        }
        OptimizerSpec::Adadelta { lr } => Box::new(Adadelta::new(params, AdadeltaConfig { lr, ..AdadeltaConfig::default() }).map_err(|e| s(&e))?),
        OptimizerSpec::Adam { lr } => Box::new(Adam::new(params, AdamConfig::adam(lr)).map_err(|e| s(&e))?),
        OptimizerSpec::AdamW { lr } => Box::new(Adam::new(params, AdamConfig::adamw(lr)).map_err(|e| s(&e))?),
    })
}

impl Setup {
    /// One training step on `(x, y)`, as `Trainer::fit` runs it. Nothing is read back: in f16
    /// the loss scaler's overflow check decides on the device whether the optimizer steps and
    /// what the next scale is, and the optimizer reads it a step or more later (PyTorch's
    /// `GradScaler.step` reads it back at once, except with fused optimizers).
    fn step(&mut self, x: &Tensor, y: Option<&Tensor>) -> Fallible<()> {
        let s = |e: &dyn std::fmt::Display| e.to_string();
        self.opt.zero_grad();
        let mark = liandan_nn::autocast_lowered();
        let loss = {
            let _autocast = self.precision.autocast_step(self.autocast_min_ops, &self.params).map_err(|e| s(&e))?;
            self.model.loss(x, y).map_err(|e| s(&e))?
        };
        // As `Trainer::fit`: a step that computed nothing in f16 runs unscaled.
        let scaling = scaling_needed(mark, &self.params);
        let Some(scaler) = self.scaler.as_mut().filter(|_| scaling) else {
            loss.backward().map_err(|e| s(&e))?;
            return self.opt.step().map_err(|e| s(&e));
        };
        scaler.backward(&loss).map_err(|e| s(&e))?;
        let flag = scaler.unscale_(&self.params).map_err(|e| s(&e))?;
        scaler.step(&mut *self.opt, &flag).map_err(|e| s(&e))
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

/// The least time the warm-up steps after the first take, however few `--warmup` asks for: an
/// idle GPU runs at a fraction of its clock and speeds up only after some time under load, and
/// NVIDIA's Vulkan driver runs pipelines it has just compiled (none of them in its shader disk
/// cache) 3-5x slower for the first steps (seed003_cnn's f16 step 8-9 ms after 3 warm-up
/// steps, 2 ms after 100, in processes whose first step compiled for 6 s). The clock starts after the first step, which compiles the kernels.
/// `xtask/bench_torch.py` warms PyTorch up for the same time.
pub const WARMUP_SECS: f64 = 1.0;

/// `xtask bench-model`: times `plan` steps of the model synced, then pipelined, after at least
/// `plan.warmup` warm-up steps, and [`WARMUP_SECS`] of them after the first. One untimed
/// pipelined group goes before the timed ones: on the H200 the first group recorded ahead of
/// the GPU after synced steps stalled once a process (mlp and vae about 2 ms, vit 38), and later
/// groups did not.
pub fn time_steps(a: &ChildArgs) -> Fallible<StepTimes> {
    let device = Device::parse(&a.device).map_err(|e| e.to_string())?;
    crate::set_knobs(&device, |k| {
        k.attention_sides = a.attention_sides;
        k.gelu_epilogues = a.gelu_epilogues;
    })
    .map_err(|e| e.to_string())?;
    let mut s = setup(&a.model, &device, &a.precision, a.autocast_min_ops)?;
    let (x, y) = batch_for(&*s.model, a.batch, &device)?;
    let Plan { warmup, steps, sync_every, groups } = a.plan();
    let sync = || device.synchronize().map_err(|e| e.to_string());
    let first = Instant::now();
    s.step(&x, y.as_ref())?;
    sync()?;
    let first_step_s = Some(first.elapsed().as_secs_f64());
    let start = Instant::now();
    let mut done = 1;
    while done < warmup || start.elapsed().as_secs_f64() < WARMUP_SECS {
        s.step(&x, y.as_ref())?;
        sync()?;
        done += 1;
    }
    let mut synced = Vec::new();
    for _ in 0..steps {
        let t = Instant::now();
        s.step(&x, y.as_ref())?;
        sync()?;
        synced.push(t.elapsed().as_secs_f64());
    }
    for _ in 0..sync_every {
        s.step(&x, y.as_ref())?;
    }
    sync()?;
    let phases = crate::settings::BENCH_PHASES.switch_in(&liandan_tensor::settings::env).map_err(|e| e.to_string())?.unwrap_or(false);
    crate::set_knobs(&device, |k| k.host_phases = phases).map_err(|e| e.to_string())?;
    let (before, start) = (liandan_backend_wgpu::testing::host_phases(), Instant::now());
    let mut pipelined = Vec::new();
    for _ in 0..groups {
        let t = Instant::now();
        for _ in 0..sync_every {
            s.step(&x, y.as_ref())?;
        }
        sync()?;
        pipelined.push(t.elapsed().as_secs_f64() / sync_every as f64);
    }
    let host_phases = phases.then(|| {
        let after = liandan_backend_wgpu::testing::host_phases();
        format!("{} {}: {}", a.model, a.precision, phase_line(&before, &after, groups * sync_every, start.elapsed().as_secs_f64()))
    });
    let none = || "no timed steps".to_string();
    Ok(StepTimes {
        synced: Stats::of(synced).ok_or_else(none)?,
        pipelined: Stats::of(pipelined).ok_or_else(none)?,
        peak_bytes: peak_bytes(&device),
        first_step_s,
        host_phases,
    })
}

/// Where `steps` pipelined steps that took `secs` in all spent the host's time, per step, from
/// the wgpu backend's counts before and after them: handing batches to the driver (the
/// parameter blocks' writes, `CommandEncoder::finish`, `Queue::submit`), waiting for the device
/// (its execution included), and the rest (recording the ops: the tensor library, autograd, the
/// optimizer, the backend's encoding). `xtask bench` prints each child's on stderr with
/// `LIANDAN_BENCH_PHASES=1`.
pub fn phase_line(before: &HostPhases, after: &HostPhases, steps: u64, secs: f64) -> String {
    let n = steps.max(1) as f64;
    let us = |f: fn(&HostPhases) -> u64| (f(after) - f(before)) as f64 / 1e3 / n;
    let (meta, finish, submit, wait, reach) = (us(|p| p.meta_ns), us(|p| p.finish_ns), us(|p| p.submit_ns), us(|p| p.wait_ns), us(|p| p.reach_ns));
    let (thread_finish, thread_submit) = (us(|p| p.handed_finish_ns), us(|p| p.handed_submit_ns));
    let total = secs * 1e6 / n;
    format!(
        "us a step: {total:.1} = recording {:.1} + waiting for the submit thread {reach:.1} + parameter writes {meta:.1} + finish {finish:.1} + submit {submit:.1} + waiting {wait:.1}; the submit thread: finish {thread_finish:.1}, submit {thread_submit:.1}; a step: {:.1} dispatches, {:.2} submits, {:.2} waits, {:.1} polls, {:.1} bind groups made",
        total - meta - finish - submit - wait - reach,
        (after.dispatches - before.dispatches) as f64 / n,
        (after.submits - before.submits) as f64 / n,
        (after.waits - before.waits) as f64 / n,
        (after.polls - before.polls) as f64 / n,
        (after.bind_groups_made - before.bind_groups_made) as f64 / n
    )
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
    crate::set_knobs(&device, |k| {
        k.attention_sides = a.attention_sides;
        k.gelu_epilogues = a.gelu_epilogues;
    })
    .map_err(|e| e.to_string())?;
    let mut s = setup(&a.model, &device, &a.precision, a.autocast_min_ops)?;
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
