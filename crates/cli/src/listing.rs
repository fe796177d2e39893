//! `liandan info`, `zoo` and `summary`: what liandan can run on, and the models it has.

use liandan_nn::zoo::{OptimizerSpec, ZooSpec};
use liandan_nn::{summary, zoo, DType, Device, ModuleExt, Tensor};
use liandan_train::optim::AdamWConfig;

use crate::args::SummaryArgs;
use crate::common::{default_data, default_epochs};
use crate::output::{say, text};
use crate::train::optimizer_name;
use crate::Failure;

/// The devices, their facts and the one `best()` picks, after a tiny computation on it. Under
/// an MPI launcher, rank 0 prints that, then every rank's place in the job and its device.
pub fn info() -> Result<(), Failure> {
    let Some(dist) = crate::ranks::join()? else { return devices() };
    let mine = (|| -> Result<(Device, String), Failure> {
        let best = Device::best().map_err(|e| Failure::usage(e.to_string()))?;
        let (device, why) = crate::ranks::device(&dist, None, (best, "the best device found".into()));
        check(&device)?;
        Ok((device, why))
    })();
    let (device, why) = crate::ranks::or_abort(&dist, "info", mine)?;
    let ranks = crate::ranks::describe(&dist, &device, &why);
    if dist.is_root() {
        devices()?;
        say!("MPI job of {} ranks (each checked on its device):", ranks.len())?;
        for line in ranks {
            say!("    {line}")?;
        }
    }
    Ok(())
}

fn devices() -> Result<(), Failure> {
    for d in Device::all() {
        say!("{d}")?;
        for (key, value) in d.describe() {
            say!("    {key:<24} {value}")?;
        }
    }
    let best = Device::best().map_err(|e| Failure::usage(e.to_string()))?;
    // What the environment changes (docs/SETTINGS.md lists every setting).
    let changed = crate::settings::changed();
    if !changed.is_empty() {
        say!("settings: {}", changed.join(" "))?;
    }
    check(&best)?;
    say!("best: {best}")
}

/// A tiny computation, so that `info` also proves the device works (an error if it does not).
fn check(device: &Device) -> Result<(), Failure> {
    let x = Tensor::arange(0.0, 4.0, 1.0, DType::F32, device).map_err(|e| Failure { code: 1, message: e.to_string() })?;
    let sum = x.sum_all().and_then(|s| s.item::<f32>()).map_err(|e| Failure { code: 1, message: e.to_string() })?;
    if sum != 6.0 {
        return Err(Failure { code: 1, message: format!("{device} computes sum(0..4) = {sum}, not 6; it is not working") });
    }
    Ok(())
}

/// The zoo's models: their inputs and losses, and what `train` uses unless told otherwise.
pub fn zoo() -> Result<(), Failure> {
    say!("{:<12} {:>9}  {:<8} {:<15} {:<42} {:>5} {:>6}  {:<8} architecture", "model", "params", "input", "loss", "optimizer", "batch", "epochs", "data")?;
    for s in zoo::SPECS {
        let input = s.input_shape[1..].iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        let input = if s.name == "mlp" { format!("{input}*") } else { input };
        say!(
            "{:<12} {:>9}  {:<8} {:<15} {:<42} {:>5} {:>6}  {:<8} {}",
            s.name,
            s.params,
            input,
            s.loss,
            optimizer(s),
            s.input_shape[0],
            default_epochs(s),
            default_data(s),
            s.architecture
        )?;
    }
    say!("* mlp's first layer takes as many inputs as the data's samples have (784 for MNIST, 3072 for CIFAR-10); the benchmarks' is 1024.")?;
    Ok(())
}

/// The optimizer `train` uses for `spec` unless told otherwise, with its settings, in
/// `--optimizer` and `--scheduler` terms.
fn optimizer(spec: &ZooSpec) -> String {
    let name = optimizer_name(None, spec);
    let mut text = match spec.optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay } => {
            let mut t = format!("{name} lr {lr}");
            if momentum != 0.0 {
                t += &format!(" momentum {momentum}");
            }
            if weight_decay != 0.0 {
                t += &format!(" weight decay {weight_decay}");
            }
            t
        }
        OptimizerSpec::AdamW { lr } => format!("{name} lr {lr} weight decay {}", AdamWConfig::default().weight_decay),
        OptimizerSpec::Adadelta { lr } | OptimizerSpec::Adam { lr } => format!("{name} lr {lr}"),
    };
    if let Some(gamma) = spec.step_lr_gamma {
        text += &format!(", scheduler step:{gamma}");
    }
    text
}

/// `liandan summary <model> [--batch N]`, on the CPU (shapes and counts are the same on every
/// device).
pub fn summary(args: &SummaryArgs) -> Result<(), Failure> {
    let name = args.model.as_str();
    let spec = zoo::spec(name)?;
    let mut shape = spec.input_shape.to_vec();
    shape[0] = match &args.batch {
        None => 1,
        Some(n) => n.parse().ok().filter(|&b| b > 0).ok_or_else(|| Failure::usage(format!("--batch takes a positive whole number, not `{n}`")))?,
    };
    let dev = Device::cpu();
    let model = zoo::build(name, &dev)?;
    let s = summary::summary(model.as_ref(), &shape, &dev)?;
    say!("{name}: {}", spec.architecture)?;
    text(&s.to_string())?;
    debug_assert_eq!(model.num_parameters(), spec.params);
    Ok(())
}
