//! Project chores. `cargo xtask bench [--device cpu|gpu|gpu:N|all] [--quick]` times the core
//! kernels and a training step and prints a Markdown table (median of timed repeats after
//! warm-up, the device synchronized around each repeat). `xtask/bench_torch.py` prints the
//! same table for PyTorch, so both sides can be measured in one run on one machine.
//! `LIANDAN_BENCH_LABEL` renames the side (to time two builds in one run). Benchmarks are never
//! tests: nothing here asserts a time. `cargo xtask bench-fusion [--device ..] [--quick]`
//! times the zoo `lstm` and Adam/SGD steps over resnet18 with fused kernels on and off
//! (`fusion.rs`). `cargo xtask fuzz
//! [--cases N]` and `cargo xtask bench-loader` are the data chores of `data.rs`.

mod data;
mod fusion;

use std::time::Instant;

use liandan_tensor::{no_grad, DType, Device, Reduction, Result, Tensor};

// Linking the backends registers their devices.
use liandan_backend_cpu as _;
use liandan_backend_wgpu as _;

#[global_allocator]
static ALLOCATOR: data::Tracking = data::Tracking;

/// Median seconds of `reps` runs of `f` after `warmup` runs.
fn time(device: &Device, warmup: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    device.synchronize()?;
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        device.synchronize()?;
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn row(device: &str, bench: &str, size: &str, seconds: f64, throughput: &str) {
    let label = std::env::var("LIANDAN_BENCH_LABEL").unwrap_or_else(|_| "liandan".into());
    println!("| {label} {device} | {bench} | {size} | {:.3} | {throughput} |", seconds * 1e3);
}

fn bench(device: &Device, quick: bool) -> Result<()> {
    let name = if device.is_cpu() { "cpu".to_string() } else { format!("wgpu {}", device.backend().name()) };
    let reps = if quick { 3 } else { 10 };
    let sizes: &[usize] = if quick { &[256, 512] } else { &[1024, 2048, 4096] };
    for &n in sizes {
        let a = Tensor::randn(&[n, n], 1, DType::F32, device)?;
        let b = Tensor::randn(&[n, n], 2, DType::F32, device)?;
        let s = time(device, 2, reps, || a.matmul(&b).map(drop))?;
        row(&name, "matmul f32", &format!("{n}x{n}x{n}"), s, &format!("{:.0} GFLOP/s", 2.0 * (n as f64).powi(3) / s / 1e9));
    }
    let n = if quick { 1 << 20 } else { 1 << 24 };
    let a = Tensor::randn(&[n], 3, DType::F32, device)?;
    let b = Tensor::randn(&[n], 4, DType::F32, device)?;
    let s = time(device, 2, reps, || a.add(&b).map(drop))?;
    row(&name, "add f32 (read 2, write 1)", &n.to_string(), s, &format!("{:.1} GB/s", 3.0 * 4.0 * n as f64 / s / 1e9));

    // Per-op overhead: a chain of dependent adds on one element, waited for once.
    let chain = 1000;
    let x = Tensor::zeros(&[1], DType::F32, device)?;
    let s = time(device, 2, reps, || {
        let mut y = x.clone();
        for _ in 0..chain {
            y = y.add_scalar(1.0)?;
        }
        Ok(())
    })?;
    row(&name, "dependent tiny adds", &format!("{chain} ops"), s, &format!("{:.2} us/op", s * 1e6 / chain as f64));

    // The zoo's `mlp` (1024-512-256-10, batch 1024, SGD lr 0.01) written with raw tensor ops.
    let batch = if quick { 256 } else { 1024 };
    let x = Tensor::randn(&[batch, 1024], 6, DType::F32, device)?;
    let labels: Vec<i64> = (0..batch as i64).map(|i| i % 10).collect();
    let y = Tensor::from_vec(labels, &[batch], device)?;
    let dims = [(1024, 512), (512, 256), (256, 10)];
    let params: Vec<(Tensor, Tensor)> = dims
        .iter()
        .enumerate()
        .map(|(i, &(i_n, o_n))| {
            let bound = 1.0 / (i_n as f64).sqrt();
            let w = Tensor::rand(&[o_n, i_n], -bound, bound, 10 + i as u64, DType::F32, device)?.requires_grad_(true)?;
            let b = Tensor::rand(&[o_n], -bound, bound, 20 + i as u64, DType::F32, device)?.requires_grad_(true)?;
            Ok((w, b))
        })
        .collect::<Result<_>>()?;
    let s = time(device, 3, reps, || {
        let mut h = x.clone();
        for (i, (w, b)) in params.iter().enumerate() {
            h = h.matmul(&w.t()?)?.add(b)?;
            if i + 1 < params.len() {
                h = h.relu()?;
            }
        }
        h.cross_entropy(&y, Reduction::Mean)?.backward()?;
        no_grad(|| {
            for (w, b) in &params {
                for p in [w, b] {
                    let g = p.grad().expect("every parameter has a gradient");
                    p.assign(&p.sub(&g.mul_scalar(0.01)?)?)?;
                    p.set_grad(None);
                }
            }
            Ok(())
        })
    })?;
    row(&name, "mlp train step (zoo shapes)", &format!("batch {batch}"), s, "");
    if !device.is_cpu() {
        zoo_passes(device, &name, quick)?;
        zoo_train_steps(device, &name, quick)?;
    }
    for (op, count) in device.fallback_report() {
        eprintln!("note: on {name}, `{op}` ran on the CPU {count} times");
    }
    Ok(())
}

/// Forward and backward of every zoo model at its reference batch (the training step without
/// the optimizer step; `zoo_train_steps` adds it), on GPUs only: our CPU backend would
/// take minutes over the convolutional models. `bench_torch.py` times the same passes.
fn zoo_passes(device: &Device, name: &str, quick: bool) -> Result<()> {
    use liandan_nn::{zoo, ModuleExt};
    let reps = if quick { 3 } else { 10 };
    for spec in zoo::SPECS {
        let mut shape = spec.input_shape.to_vec();
        if quick {
            shape[0] = shape[0].min(16);
        }
        let model =
            zoo::build(spec.name, device).map_err(|e| liandan_tensor::Error::Backend { backend: name.into(), op: "zoo::build", detail: e.to_string() })?;
        let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
        let y = Tensor::from_vec((0..shape[0] as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[shape[0]], device)?;
        let s = time(device, 3, reps, || {
            model.zero_grad();
            let loss = model.loss(&x, Some(&y)).map_err(|e| liandan_tensor::Error::Backend { backend: name.into(), op: "zoo loss", detail: e.to_string() })?;
            loss.backward()
        })?;
        row(name, &format!("zoo {} forward+backward", spec.name), &format!("batch {}", shape[0]), s, &format!("{:.0} samples/s", shape[0] as f64 / s));
    }
    Ok(())
}

/// A full training step of every zoo model (forward, backward, and the step of the optimizer
/// `MODEL_ZOO.md` names), beside the forward+backward rows so the optimizer's share shows.
/// `bench_torch.py` times the same steps with `torch.optim`.
fn zoo_train_steps(device: &Device, name: &str, quick: bool) -> Result<()> {
    use liandan_nn::zoo::{self, OptimizerSpec};
    use liandan_nn::ModuleExt;
    use liandan_train::optim::{Adadelta, AdadeltaConfig, Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
    let err = |op: &'static str, e: &dyn std::fmt::Display| liandan_tensor::Error::Backend { backend: name.into(), op, detail: e.to_string() };
    let reps = if quick { 3 } else { 10 };
    for spec in zoo::SPECS {
        let mut shape = spec.input_shape.to_vec();
        if quick {
            shape[0] = shape[0].min(16);
        }
        let model = zoo::build(spec.name, device).map_err(|e| err("zoo::build", &e))?;
        let params = model.named_parameters();
        let mut opt: Box<dyn Optimizer> = match spec.optimizer {
            OptimizerSpec::Sgd { lr, momentum, weight_decay } => {
                Box::new(Sgd::new(params, SgdConfig { lr, momentum, weight_decay, ..SgdConfig::default() }).map_err(|e| err("optimizer", &e))?)
            }
            OptimizerSpec::Adadelta { lr } => {
                Box::new(Adadelta::new(params, AdadeltaConfig { lr, ..AdadeltaConfig::default() }).map_err(|e| err("optimizer", &e))?)
            }
            OptimizerSpec::Adam { lr } => Box::new(Adam::new(params, AdamConfig::adam(lr)).map_err(|e| err("optimizer", &e))?),
            OptimizerSpec::AdamW { lr } => Box::new(Adam::new(params, AdamConfig::adamw(lr)).map_err(|e| err("optimizer", &e))?),
        };
        let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
        let y = Tensor::from_vec((0..shape[0] as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[shape[0]], device)?;
        let s = time(device, 3, reps, || {
            opt.zero_grad();
            model.loss(&x, Some(&y)).map_err(|e| err("zoo loss", &e))?.backward()?;
            opt.step().map_err(|e| err("optimizer step", &e))
        })?;
        row(name, &format!("zoo {} train step", spec.name), &format!("batch {}", shape[0]), s, &format!("{:.0} samples/s", shape[0] as f64 / s));
    }
    Ok(())
}

fn devices(spec: Option<&str>) -> std::result::Result<Vec<Device>, String> {
    match spec {
        None | Some("all") => {
            let mut all = vec![Device::cpu()];
            all.extend(Device::gpus());
            Ok(all)
        }
        Some(s) => Device::parse(s).map(|d| vec![d]).map_err(|e| e.to_string()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let spec = args.iter().position(|a| a == "--device").map(|i| args.get(i + 1).map(String::as_str).unwrap_or(""));
    let chore = match args.first().map(String::as_str) {
        Some("fuzz") => Some(data::fuzz_all(&args)),
        Some("bench-loader") => Some(data::bench_loader()),
        _ => None,
    };
    if let Some(result) = chore {
        if let Err(e) = result {
            eprintln!("xtask {}: {e}", args[0]);
            std::process::exit(1);
        }
        return;
    }
    let command = args.first().map(String::as_str);
    if command != Some("bench") && command != Some("bench-fusion") {
        eprintln!("usage: cargo xtask bench|bench-fusion [--device cpu|gpu|gpu:N|all] [--quick] | fuzz [--cases N] | bench-loader");
        std::process::exit(2);
    }
    let devices = devices(spec).unwrap_or_else(|e| {
        eprintln!("xtask bench: {e}");
        std::process::exit(2);
    });
    if command == Some("bench-fusion") {
        for d in devices {
            if let Err(e) = fusion::bench_fusion(&d, quick) {
                eprintln!("xtask bench-fusion on {d}: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    println!("| side | benchmark | size | median ms | throughput |");
    println!("|---|---|---|---|---|");
    for d in devices {
        if let Err(e) = bench(&d, quick) {
            eprintln!("xtask bench on {d}: {e}");
            std::process::exit(1);
        }
    }
}
