//! `cargo xtask bench-fusion`: each fused kernel's workload with fusion on and off, in one
//! process on one device, so a fused kernel's gain is measured against the composite it
//! replaces in the same run: the zoo `lstm` model's forward+backward (the LSTM cell), resnet18's
//! forward+backward in training (batch norm, forward and backward), and an
//! Adam and an SGD step over resnet18's 62 parameter tensors (the optimizer updates, and their
//! multi-tensor kernels against one update kernel per tensor, `no_foreach`). Then
//! what the optimizer step costs a training step (#8's speed goal: no more than PyTorch's),
//! for every zoo model with its docs/MODEL_ZOO.md optimizer, fused; with `--torch`, the same from
//! PyTorch (`bench_torch.py --overhead`). Prints Markdown tables; asserts nothing.

use std::path::Path;
use std::process::Command;

use liandan_nn::{zoo, ModuleExt};
use liandan_tensor::{no_fusion, DType, Device, Error, Result, Tensor};
use liandan_train::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use liandan_train::testing::no_foreach;

/// Steps a pipelined "step alone" runs between synchronizes (`bench_torch.py` uses the same).
const PIPELINED: usize = 20;

/// One row: median ms of `step` with fusion on and with it off, after a first, unkept round
/// of each that warms both paths up (pipelines, allocator, optimizer state).
fn row(name: &str, what: &str, size: &str, device: &Device, reps: usize, step: impl FnMut() -> Result<()>) -> Result<()> {
    row_against(name, what, size, device, reps, |f| no_fusion(f), step)
}

/// [`row`] with `off(f)` (running `f` with the fused path being measured off) in place of
/// `no_fusion`.
fn row_against(
    name: &str,
    what: &str,
    size: &str,
    device: &Device,
    reps: usize,
    off: impl Fn(&mut dyn FnMut() -> Result<f64>) -> Result<f64>,
    mut step: impl FnMut() -> Result<()>,
) -> Result<()> {
    crate::time(device, 2, 1, &mut step)?;
    off(&mut || crate::time(device, 2, 1, &mut step))?;
    let a = crate::time(device, 2, reps, &mut step)?;
    let b = off(&mut || crate::time(device, 2, reps, &mut step))?;
    println!("| {name} | {what} | {size} | {:.3} | {:.3} | {:.2}x |", a * 1e3, b * 1e3, b / a);
    Ok(())
}

fn nn_err(e: impl std::fmt::Display) -> Error {
    Error::Device(e.to_string())
}

/// Every row, on `device`; `quick` shrinks the lstm batch to 16 and the repetitions to 3.
/// With `python`, the step-overhead table also has PyTorch's rows (run by that Python).
pub fn bench_fusion(device: &Device, quick: bool, python: Option<&str>) -> Result<()> {
    let name = if device.is_cpu() { "cpu".to_string() } else { format!("wgpu {}", device.backend().name()) };
    let reps = if quick { 3 } else { 10 };
    println!("| device | workload | size | fused ms | unfused ms | speedup |");
    println!("|---|---|---|---|---|---|");

    let spec = zoo::spec("lstm").map_err(nn_err)?;
    let mut shape = spec.input_shape.to_vec();
    if quick {
        shape[0] = shape[0].min(16);
    }
    let model = zoo::build("lstm", device).map_err(nn_err)?;
    let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
    let y = Tensor::from_vec((0..shape[0] as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[shape[0]], device)?;
    row(&name, "lstm forward+backward", &format!("batch {}", shape[0]), device, reps, || {
        model.zero_grad();
        model.loss(&x, Some(&y)).map_err(nn_err)?.backward()
    })?;

    // resnet18's forward+backward in training: its 20 batch norms are its fused ops.
    let net = zoo::build("resnet18", device).map_err(nn_err)?;
    let batch = if quick { 16 } else { zoo::spec("resnet18").map_err(nn_err)?.input_shape[0] };
    let x = Tensor::rand(&[batch, 3, 32, 32], -1.0, 1.0, 8, DType::F32, device)?;
    let y = Tensor::from_vec((0..batch as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[batch], device)?;
    row(&name, "resnet18 forward+backward (batch norm)", &format!("batch {batch}"), device, reps, || {
        net.zero_grad();
        net.loss(&x, Some(&y)).map_err(nn_err)?.backward()
    })?;

    // The optimizer rows: resnet18's parameters with seeded gradients, stepped in place.
    let resnet = zoo::build("resnet18", device).map_err(nn_err)?;
    let params = resnet.named_parameters();
    for (k, (_, p)) in params.iter().enumerate() {
        p.set_grad(Some(Tensor::rand(p.shape(), -1.0, 1.0, 100 + k as u64, DType::F32, device)?));
    }
    let size = format!("{} tensors", params.len());
    let optimizers: [(&str, Box<dyn Optimizer>); 3] = [
        ("Adam step (resnet18)", Box::new(Adam::new(params.clone(), AdamConfig::adam(1e-3)).map_err(nn_err)?)),
        ("AdamW amsgrad step (resnet18)", Box::new(Adam::new(params.clone(), AdamConfig { amsgrad: true, ..AdamConfig::adamw(1e-3) }).map_err(nn_err)?)),
        (
            "SGD momentum + weight decay step (resnet18)",
            Box::new(Sgd::new(params.clone(), SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 5e-4, ..SgdConfig::default() }).map_err(nn_err)?),
        ),
    ];
    for (what, mut opt) in optimizers {
        row(&name, what, &size, device, reps, || opt.step().map_err(nn_err))?;
        // The same step, multi-tensor updates against one fused update per tensor.
        let against = format!("{what}, multi-tensor against per-tensor updates");
        row_against(&name, &against, &size, device, reps, |f| no_foreach(f), || opt.step().map_err(nn_err))?;
    }
    step_overhead(&name, device, quick, python)
}

/// PyTorch's `{"fwd_bwd_ms", "step_ms", "step_alone_ms", "step_alone_pipelined_ms"}` for one model (ms), or why there is none.
fn torch_overhead(python: &str, model: &str, device: &Device, batch: usize, reps: usize) -> std::result::Result<serde_json::Value, String> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench_torch.py");
    let script = if built.is_file() { built } else { Path::new("xtask/bench_torch.py").to_path_buf() };
    let spec = match Device::gpus().iter().position(|d| d.same(device)) {
        Some(n) if !device.is_cpu() => format!("gpu:{n}"),
        _ => "cpu".into(),
    };
    let args = ["--overhead", "--model", model, "--device", &spec, "--batch", &batch.to_string(), "--steps", &reps.to_string()];
    let out = Command::new(python).arg(&script).args(args).output().map_err(|e| format!("cannot run {python}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{} ({})", out.status, stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message")));
    }
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).ok_or("printed no result")?;
    serde_json::from_str(line).map_err(|e| format!("unreadable result ({e}): {line}"))
}

/// What the optimizer step of docs/MODEL_ZOO.md costs each zoo model, fused (median ms of
/// synchronized repetitions): forward+backward, the same plus the step, their difference, and
/// the step alone (the gradients of one backward stepped again and again: the same work, without
/// the noise of the difference), the same pipelined (`PIPELINED` steps, one synchronize: what a
/// training loop sees, without the synchronize that dominates a small model's step), and the
/// step alone with one update kernel per parameter tensor (`no_foreach`: what the step cost
/// before the multi-tensor updates); beside PyTorch's where `python` is given.
fn step_overhead(name: &str, device: &Device, quick: bool, python: Option<&str>) -> Result<()> {
    let reps = if quick { 3 } else { 20 };
    println!();
    println!(
        "| device | model | batch | optimizer | fwd+bwd ms | fwd+bwd+step ms | step adds ms | step alone ms | step alone pipelined ms | step alone, per tensor ms | torch fwd+bwd ms | torch fwd+bwd+step ms | torch step adds ms | torch step alone ms | torch step alone pipelined ms | step alone / torch's | pipelined / torch's |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for model_name in zoo::names() {
        let spec = zoo::spec(model_name).map_err(nn_err)?;
        let mut shape = spec.input_shape.to_vec();
        if quick {
            shape[0] = shape[0].min(if device.is_cpu() { 4 } else { 16 });
        }
        let batch = shape[0];
        let model = zoo::build(model_name, device).map_err(nn_err)?;
        let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
        let y = match spec.target {
            zoo::Target::Classes(k) => Some(Tensor::from_vec((0..batch as i64).map(|i| i % k as i64).collect::<Vec<i64>>(), &[batch], device)?),
            zoo::Target::Reconstruction => None,
        };
        let fwd_bwd = || -> Result<()> {
            model.zero_grad();
            model.loss(&x, y.as_ref()).map_err(nn_err)?.backward()
        };
        let base = crate::time(device, 2, reps, fwd_bwd)?;
        let mut opt = crate::bench::step::zoo_optimizer(model.as_ref()).map_err(Error::Device)?;
        let full = crate::time(device, 2, reps, || {
            fwd_bwd()?;
            opt.step().map_err(nn_err)
        })?;
        let alone = crate::time(device, 2, reps, || opt.step().map_err(nn_err))?;
        let pipelined = crate::time(device, 1, (reps / 4).max(3), || (0..PIPELINED).try_for_each(|_| opt.step().map_err(nn_err)))? / PIPELINED as f64;
        let per_tensor = no_foreach(|| crate::time(device, 2, reps, || opt.step().map_err(nn_err)))?;
        let which = format!("{:?}", spec.optimizer);
        let which = which.split([' ', '{']).next().unwrap_or("?");
        let ours = format!(
            "{:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3}",
            base * 1e3,
            full * 1e3,
            (full - base) * 1e3,
            alone * 1e3,
            pipelined * 1e3,
            per_tensor * 1e3
        );
        let torch = match python.map(|py| torch_overhead(py, model_name, device, batch, reps)) {
            None => "- | - | - | - | - | - | -".to_string(),
            Some(Err(e)) => format!("PyTorch failed: {e} | - | - | - | - | - | -"),
            Some(Ok(t)) => {
                let get = |k: &str| t[k].as_f64().unwrap_or(f64::NAN);
                let (b, f, a, p) = (get("fwd_bwd_ms"), get("step_ms"), get("step_alone_ms"), get("step_alone_pipelined_ms"));
                format!("{b:.3} | {f:.3} | {:.3} | {a:.3} | {p:.3} | {:.2}x | {:.2}x", f - b, alone * 1e3 / a, pipelined * 1e3 / p)
            }
        };
        println!("| {name} | {model_name} | {batch} | {which} | {ours} | {torch} |");
    }
    Ok(())
}
