//! `cargo xtask bench-host [--device gpu] [--ops N] [--reps N] [--only TEXT] [--first-batch N]`:
//! what an op costs the host, apart from what it costs the device, and what a synchronize costs
//! (`--only`: the rows whose name holds TEXT).
//!
//! A small model's step is bound by the host when recording its ops takes longer than running
//! them (the zoo `lstm` on an H200: about 330 op calls per step). Each "record" row times only
//! the calls that record work, with no wait inside the timed span: the device runs the work
//! after the clock stops, at one synchronize that is not timed. On a software adapter
//! (lavapipe) the kernels run on the same CPU, so only these rows separate our encode cost
//! from execution there. The "sync" rows time a whole wait, execution included. A "record"
//! row also counts the heap allocations a call makes on the host (the process's allocator
//! counts them, `data::Tracking`), which are what a shape or a launch costs beyond its work.
//!
//! On lavapipe run it with `--first-batch 512` and keep `--ops` under that batch:
//! lavapipe runs a submitted batch inside `vkQueueSubmit`, on the calling thread, so a submit
//! in the timed span would count the batch's execution, and the recorder's first batch after a
//! wait is otherwise 16 dispatches. Each sample starts from an idle device with an empty batch.

use std::time::Instant;

use liandan_nn::zoo::{self, Target};
use liandan_nn::ModuleExt;
use liandan_tensor::{DType, Device, Tensor};
use liandan_train::optim::{Optimizer, Sgd, SgdConfig};
use liandan_train::testing::no_foreach;

/// Any error of the crates timed here (tensor, nn, train).
type Fallible<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Median of `reps` timings of `f`, each returning the seconds it counts, after one warm-up.
fn median(reps: usize, mut f: impl FnMut() -> Fallible<f64>) -> Fallible<f64> {
    f()?;
    let mut samples: Vec<f64> = (0..reps).map(|_| f()).collect::<Fallible<_>>()?;
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

thread_local! {
    /// Heap allocations per call in the last sample `record` took, for the table's last column.
    static ALLOCATIONS: std::cell::Cell<Option<f64>> = const { std::cell::Cell::new(None) };
}

/// Microseconds per call of `op`, called `ops` times with nothing waited for inside the timed
/// span, then one (untimed) synchronize so the next sample starts from an idle device.
fn record<E: Into<Box<dyn std::error::Error>>>(device: &Device, ops: usize, reps: usize, mut op: impl FnMut() -> Result<(), E>) -> Fallible<f64> {
    let s = median(reps, || {
        device.synchronize()?;
        let (t, heap) = (Instant::now(), crate::data::allocations());
        for _ in 0..ops {
            op().map_err(Into::into)?;
        }
        let s = t.elapsed().as_secs_f64();
        ALLOCATIONS.set(Some((crate::data::allocations() - heap) as f64 / ops as f64));
        device.synchronize()?;
        Ok(s)
    })?;
    Ok(s * 1e6 / ops as f64)
}

/// Microseconds of `f` and the wait it ends with, median of `reps`.
fn synced<E: Into<Box<dyn std::error::Error>>>(device: &Device, reps: usize, mut f: impl FnMut() -> Result<(), E>) -> Fallible<f64> {
    let s = median(reps, || {
        device.synchronize()?;
        let t = Instant::now();
        f().map_err(Into::into)?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    Ok(s * 1e6)
}

/// Where an add and a synchronize spend the host's time, as means over `n` of them: recording
/// the add, then the submit's parts and the wait (`liandan_backend_wgpu::testing::host_phases`,
/// timed for these alone), and what is left (the synchronize's own bookkeeping).
fn sync_split(device: &Device, n: usize, a: &Tensor, b: &Tensor) -> Fallible<Vec<(String, f64)>> {
    device.synchronize()?;
    crate::set_knobs(device, |k| k.host_phases = true)?;
    let (mut total, mut record) = (0.0, 0.0);
    let before = liandan_backend_wgpu::testing::host_phases();
    for _ in 0..n {
        let t = Instant::now();
        let y = a.add(b)?;
        record += t.elapsed().as_secs_f64();
        device.synchronize()?;
        total += t.elapsed().as_secs_f64();
        drop(y);
    }
    let after = liandan_backend_wgpu::testing::host_phases();
    crate::set_knobs(device, |k| k.host_phases = false)?;
    let us = |ns: u64| ns as f64 / 1e3 / n as f64;
    let (total, record) = (total * 1e6 / n as f64, record * 1e6 / n as f64);
    let parts = [
        ("recording the add", record),
        ("writing the parameter blocks (Queue::write_buffer)", us(after.meta_ns - before.meta_ns)),
        ("ending the encoder (CommandEncoder::finish)", us(after.finish_ns - before.finish_ns)),
        ("Queue::submit", us(after.submit_ns - before.submit_ns)),
        ("waiting until the device is idle", us(after.wait_ns - before.wait_ns)),
    ];
    let polls = (after.polls - before.polls) as f64 / (after.waits - before.waits).max(1) as f64;
    let rest = total - parts.iter().map(|p| p.1).sum::<f64>();
    let mut rows = vec![("sync: add [1] + synchronize, split: mean of the whole".to_string(), total)];
    rows.extend(parts.iter().map(|(what, v)| (format!("sync: add [1] + synchronize, split: {what}"), *v)));
    rows.push(("sync: add [1] + synchronize, split: polls per wait (a count)".to_string(), polls));
    rows.push(("sync: add [1] + synchronize, split: the rest".to_string(), rest));
    Ok(rows)
}

pub fn bench_host(args: &[String]) -> Result<(), String> {
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str);
    let number = |flag: &str, default: usize| -> Result<usize, String> {
        match value(flag) {
            None => Ok(default),
            Some(v) => v.parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("{flag} {v:?} is not a positive count")),
        }
    };
    let mut device = Device::parse(value("--device").unwrap_or("gpu")).map_err(|e| e.to_string())?;
    if value("--first-batch").is_some() {
        // A device of its own, as the first batch is set when a device opens.
        let first = number("--first-batch", 16)?;
        let mut options = liandan_backend_wgpu::WgpuBackend::of(&device).ok_or("--first-batch needs a GPU")?.options();
        options.testing.first_batch = first;
        device = liandan_backend_wgpu::with_options(&device, options).map_err(|e| e.to_string())?;
    }
    let (ops, reps) = (number("--ops", 400)?, number("--reps", 7)?);
    let rows = run(&device, ops, reps, value("--only")).map_err(|e| e.to_string())?;
    println!("host cost per op on {device} ({ops} calls per sample, median of {reps} samples)\n");
    println!("| row | us | heap allocations |");
    println!("|---|---|---|");
    for (name, us, allocations) in rows {
        let allocations = allocations.map_or("-".to_string(), |n| format!("{n:.1}"));
        println!("| {name} | {us:.1} | {allocations} |");
    }
    Ok(())
}

fn run(device: &Device, ops: usize, reps: usize, only: Option<&str>) -> Fallible<Vec<(String, f64, Option<f64>)>> {
    let mut rows = Vec::new();
    let mut row = |name: &str, time: &mut dyn FnMut() -> Fallible<f64>| -> Fallible<()> {
        if only.is_none_or(|o| name.contains(o)) {
            ALLOCATIONS.set(None);
            let us = time()?;
            rows.push((name.to_string(), us, ALLOCATIONS.take()));
        }
        Ok(())
    };
    let f32 = DType::F32;
    let one_a = Tensor::randn(&[1], 1, f32, device)?;
    let one_b = Tensor::randn(&[1], 2, f32, device)?;
    row("record: add [1] + [1], per op", &mut || record(device, ops, reps, || one_a.add(&one_b).map(drop)))?;
    let (a, b) = (Tensor::randn(&[64, 1024], 3, f32, device)?, Tensor::randn(&[1024], 4, f32, device)?);
    row("record: add [64,1024] + [1024] (bias), per op", &mut || record(device, ops, reps, || a.add(&b).map(drop)))?;
    let (x, w) = (Tensor::randn(&[64, 256], 5, f32, device)?, Tensor::randn(&[1024, 256], 6, f32, device)?);
    let wt = w.transpose(0, 1)?;
    row("record: matmul [64,256] x [1024,256]^T (lstm step), per op", &mut || record(device, ops, reps, || x.matmul(&wt).map(drop)))?;
    let (ga, gb) = (one_a.detach().requires_grad_(true)?, one_b.detach().requires_grad_(true)?);
    row("record: add [1] + [1], inputs requiring grad, per op", &mut || record(device, ops, reps, || ga.add(&gb).map(drop)))?;
    // A chain, as a network is: each op reads the last one's output, which stays alive until then.
    row("record: chain of mul_scalar on [1], per op", &mut || {
        let us = record(device, 1, reps, || -> Fallible<()> {
            let mut y = one_a.clone();
            for _ in 0..ops {
                y = y.mul_scalar(1.0)?;
            }
            Ok(())
        })?;
        // `record` counted one call of the whole chain: per op, as the other rows.
        ALLOCATIONS.set(ALLOCATIONS.get().map(|a| a / ops as f64));
        Ok(us / ops as f64)
    })?;
    row("record: zoo lstm (batch 64) training step, per step", &mut || lstm_step(device, reps))?;
    row("record: resnet18 SGD step (multi-tensor updates), per step", &mut || resnet18_step(device, reps))?;
    row("record: resnet18 SGD step (an update per tensor), per step", &mut || no_foreach(|| resnet18_step(device, reps)))?;

    let sync_reps = 10 * reps;
    row("sync: synchronize, nothing pending", &mut || synced(device, sync_reps, || device.synchronize()))?;
    row("sync: add [1] + synchronize", &mut || synced(device, sync_reps, || one_a.add(&one_b).and_then(|_| device.synchronize())))?;
    row("sync: add [1] + read the value back", &mut || {
        synced(device, sync_reps, || -> Fallible<()> { one_a.add(&one_b)?.item_f64().map(drop).map_err(Into::into) })
    })?;
    let src = Tensor::randn(&[64, 10], 7, f32, device)?;
    let index = Tensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), &[64, 1], device)?;
    row("sync: gather [64,10] + read one value back (index-fault check)", &mut || {
        synced(device, sync_reps, || -> Fallible<()> { src.gather(1, &index)?.sum_all()?.item_f64().map(drop).map_err(Into::into) })
    })?;
    if !device.is_cpu() && only.is_none_or(|o| "sync: add [1] + synchronize, split".contains(o)) {
        rows.extend(sync_split(device, sync_reps, &one_a, &one_b)?.into_iter().map(|(name, us)| (name, us, None)));
    }
    Ok(rows)
}

/// Host microseconds of one zoo `lstm` training step (forward, loss, backward, SGD), recorded
/// from an idle device (one step per sample).
fn lstm_step(device: &Device, reps: usize) -> Fallible<f64> {
    let spec = zoo::spec("lstm")?;
    let mut shape = spec.input_shape.to_vec();
    shape[0] = 64;
    let model = zoo::build(spec.name, device)?;
    let mut opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.01, ..SgdConfig::default() })?;
    let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
    let y = match spec.target {
        Target::Classes(k) => Some(Tensor::from_vec((0..shape[0] as i64).map(|i| i % k as i64).collect::<Vec<i64>>(), &[shape[0]], device)?),
        Target::Reconstruction => None,
    };
    let us = record(device, 1, reps, || -> Fallible<()> {
        opt.zero_grad();
        model.loss(&x, y.as_ref())?.backward()?;
        Ok(opt.step()?)
    })?;
    Ok(us)
}

/// Host microseconds of one optimizer step over the zoo `resnet18`'s 62 parameter tensors,
/// with its docs/MODEL_ZOO.md optimizer (SGD with momentum) and gradients set once, recorded from
/// an idle device (one step per sample).
fn resnet18_step(device: &Device, reps: usize) -> Fallible<f64> {
    let model = zoo::build("resnet18", device)?;
    for (_, p) in model.named_parameters() {
        p.set_grad(Some(p.ones_like()?));
    }
    let mut opt = crate::bench::step::zoo_optimizer(model.as_ref())?;
    record(device, 1, reps, || opt.step())
}
