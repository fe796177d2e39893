//! Project chores. `cargo xtask bench [--device cpu|gpu|gpu:N] [--quick]` times the core
//! kernels and a training step on one device and prints a table (median of timed repeats after
//! warm-up). Benchmarks are never tests: nothing here asserts a time.

use std::time::Instant;

use liandan_tensor::{no_grad, DType, Device, Reduction, Result, Tensor};

// Linking the backends registers their devices.
use liandan_backend_cpu as _;

/// Median seconds of `reps` runs of `f` after `warmup` runs, synchronizing the device each time.
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

fn bench(device: &Device, quick: bool) -> Result<()> {
    let reps = if quick { 3 } else { 10 };
    println!("device: {device}");
    println!("| benchmark | size | median | throughput |");
    println!("|---|---|---|---|");
    let sizes: &[usize] = if quick { &[256, 512] } else { &[256, 512, 1024, 2048] };
    for &n in sizes {
        let a = Tensor::randn(&[n, n], 1, DType::F32, device)?;
        let b = Tensor::randn(&[n, n], 2, DType::F32, device)?;
        let s = time(device, 2, reps, || a.matmul(&b)?.sum_all().map(drop))?;
        println!("| matmul f32 | {n}x{n}x{n} | {:.3} ms | {:.1} GFLOP/s |", s * 1e3, 2.0 * (n as f64).powi(3) / s / 1e9);
    }
    for &n in &[1usize << 20, 1 << 24] {
        let a = Tensor::randn(&[n], 3, DType::F32, device)?;
        let b = Tensor::randn(&[n], 4, DType::F32, device)?;
        let s = time(device, 2, reps, || a.add(&b).map(drop))?;
        println!("| add f32 | {n} | {:.3} ms | {:.2} GB/s |", s * 1e3, 3.0 * 4.0 * n as f64 / s / 1e9);
    }
    let x = Tensor::randn(&[1], 5, DType::F32, device)?;
    let s = time(device, 10, reps, || {
        let mut y = x.clone();
        for _ in 0..100 {
            y = y.add_scalar(1.0)?;
        }
        y.item_f64().map(drop)
    })?;
    println!("| 100 dependent tiny adds | 1 | {:.3} ms | {:.2} us/op |", s * 1e3, s * 1e6 / 100.0);

    // The zoo's `mlp` (1024-512-256-10, batch 1024, SGD lr 0.01) written with raw tensor ops.
    let batch = if quick { 256 } else { 1024 };
    let x = Tensor::randn(&[batch, 1024], 6, DType::F32, device)?;
    let y = Tensor::arange(0.0, batch as f64, 1.0, DType::I64, device)?.to_dtype(DType::F64)?;
    let y = y.sub(&y.div_scalar(10.0)?.floor()?.mul_scalar(10.0)?)?.to_dtype(DType::I64)?;
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
    let s = time(device, 2, reps, || {
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
                    let g = p.grad().expect("gradient");
                    p.assign(&p.sub(&g.mul_scalar(0.01)?)?)?;
                    p.set_grad(None);
                }
            }
            Ok(())
        })
    })?;
    println!("| mlp train step (zoo shapes) | batch {batch} | {:.3} ms | |", s * 1e3);
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let device = match args.iter().position(|a| a == "--device").map(|i| args.get(i + 1)) {
        Some(Some(spec)) => match Device::parse(spec) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("xtask bench: {e}");
                std::process::exit(2);
            }
        },
        Some(None) => {
            eprintln!("xtask bench: --device needs a value (cpu, gpu or gpu:N)");
            std::process::exit(2);
        }
        None => Device::best(),
    };
    match args.first().map(String::as_str) {
        Some("bench") => {
            if let Err(e) = bench(&device, quick) {
                eprintln!("xtask bench: {e}");
                std::process::exit(1);
            }
        }
        _ => {
            eprintln!("usage: cargo xtask bench [--device cpu|gpu|gpu:N] [--quick]");
            std::process::exit(2);
        }
    }
}
