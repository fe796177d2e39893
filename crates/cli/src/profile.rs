//! `liandan profile`: where the time of a zoo model's training step goes, per op and per layer.

use std::path::Path;

use liandan_nn::zoo::{self, Target, ZooSpec};
use liandan_nn::{DType, Device, ModuleExt, Tensor};
use liandan_tensor::profile;
use liandan_train::amp::{scaling_needed, GradScaler, Precision};
use liandan_train::optim::{for_zoo, Optimizer};

use crate::args::ProfileArgs;
use crate::common::pick_device;
use crate::output::{note, say};
use crate::Failure;

/// A failure of the run itself (not of the user's input): exit status 1.
fn failed(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure { code: 1, message: format!("{what}: {e}") }
}

pub fn profile(a: &ProfileArgs) -> Result<(), Failure> {
    let spec = zoo::spec(&a.model)?;
    let (device, why) = pick_device(a.device.as_deref())?;
    crate::settings::gpu_switches(&device, a.autotune, a.conv_tf32)?;
    if let Some(path) = &a.trace {
        check_writable(path)?;
    }
    // On the CPU the steps run on the kernels' pool, as `liandan train` runs them.
    liandan_backend_cpu::on_pool_for(&device, || profile_on(a, spec, &device, &why))
}

/// [`profile`] on `device`, picked for the reason `why`.
fn profile_on(a: &ProfileArgs, spec: &'static ZooSpec, device: &Device, why: &str) -> Result<(), Failure> {
    let mut shape = spec.input_shape.to_vec();
    shape[0] = a.batch.unwrap_or(shape[0]);
    let steps = |n: usize, what: &str| format!("{n} {what} step{}", if n == 1 { "" } else { "s" });
    note!(
        "profiling {} at batch {} on {device} ({why}) in {}: {} and {}",
        spec.name,
        shape[0],
        a.precision,
        steps(a.warmup, "warm-up"),
        steps(a.steps, "measured")
    );
    let model = zoo::build(spec.name, device)?;
    // The model's own optimizer, as `cargo xtask bench` times a step (plain SGD at one lr
    // drove the VAE's summed loss to infinity within a GPU's warm-up second).
    let mut opt = for_zoo(spec, model.named_parameters())?;
    let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device).map_err(|e| failed("input", e))?;
    let y = match spec.target {
        Target::Classes(k) => {
            Some(Tensor::from_vec((0..shape[0] as i64).map(|i| i % k as i64).collect::<Vec<i64>>(), &[shape[0]], device).map_err(|e| failed("labels", e))?)
        }
        Target::Reconstruction => None,
    };
    // Mixed precision as `liandan train` runs it: the forward under autocast and, in f16, the
    // loss scaled for backward, the gradients unscaled and checked, the skip decided on the
    // device.
    let params = model.parameters();
    let mut scaler = (a.precision == Precision::F16).then(GradScaler::new);
    let mut step = |opt: &mut dyn Optimizer| -> Result<(), Failure> {
        opt.zero_grad();
        let mark = liandan_nn::autocast_lowered();
        let loss = {
            let _autocast = a.precision.autocast_step(a.autocast_min_ops, &params).map_err(|e| failed("autocast", e))?;
            model.loss(&x, y.as_ref())?
        };
        // As `liandan train`: a step that computed nothing in f16 runs unscaled.
        let scaling = scaling_needed(mark, &params);
        let Some(scaler) = scaler.as_mut().filter(|_| scaling) else {
            loss.backward().map_err(|e| failed("backward", e))?;
            let _layer = profile::layer("optimizer");
            opt.step()?;
            return Ok(());
        };
        scaler.backward(&loss).map_err(|e| failed("backward", e))?;
        let _layer = profile::layer("optimizer");
        let flag = scaler.unscale_(&params).map_err(|e| failed("loss scale", e))?;
        scaler.step(opt, &flag).map_err(|e| failed("loss scale", e))?;
        Ok(())
    };
    // On a GPU the warm-up goes on for a second after its first step (which compiles the
    // kernels): NVIDIA's Vulkan driver ran kernels it had just compiled 3-5x slower for the
    // first steps. Each step is waited for, so that the second counts work done, not work
    // queued (a software adapter records far faster than it runs, and queued minutes of it).
    let floor = if device.is_cpu() || a.warmup == 0 { 0.0 } else { 1.0 };
    let mut first_done: Option<std::time::Instant> = None;
    let mut done = 0;
    while done < a.warmup || first_done.is_some_and(|t| t.elapsed().as_secs_f64() < floor) {
        step(opt.as_mut())?;
        done += 1;
        device.synchronize().map_err(|e| failed("synchronize", e))?;
        first_done.get_or_insert_with(std::time::Instant::now);
    }
    // Compilation and first allocations belong to the warm-up, not to the profile.
    device.synchronize().map_err(|e| failed("synchronize", e))?;
    // The peak (and, under LIANDAN_MEMORY_BREAKDOWN=1, what was live at it) of the profiled steps.
    device.reset_peak_memory();
    profile::start_with(profile::Options { record_shapes: a.shapes }).map_err(|e| failed("profile", e))?;
    let mut run = Ok(());
    for _ in 0..a.steps {
        run = step(opt.as_mut());
        if run.is_err() {
            break;
        }
    }
    let run = run.and_then(|_| device.synchronize().map_err(|e| failed("synchronize", e)));
    let p = profile::stop().map_err(|e| failed("profile", e))?;
    run?;
    say!("{p}")?;
    if let Some(breakdown) = device.memory_breakdown() {
        say!("\nDevice memory at the peak of the profiled steps, by where each buffer was made:\n{breakdown}")?;
    }
    if let Some(path) = &a.trace {
        p.write_trace(path).map_err(|e| Failure::usage(e.to_string()))?;
        note!("trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)", path.display());
    }
    if a.autotune {
        crate::settings::autotune_report(device)?;
    }
    Ok(())
}

/// Fails before the run, not after it, when the trace cannot be written where asked.
fn check_writable(path: &Path) -> Result<(), Failure> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Failure::usage(format!("--trace {}: the directory {} does not exist; create it or pick another path", path.display(), dir.display())));
    }
    if path.is_dir() {
        return Err(Failure::usage(format!("--trace {}: is a directory; give a file name such as trace.json", path.display())));
    }
    Ok(())
}
