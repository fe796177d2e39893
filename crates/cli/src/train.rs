//! `liandan train`, `eval` and `plot`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use liandan_nn::zoo;
use liandan_nn::zoo::{OptimizerSpec, ZooSpec};
use liandan_nn::{summary, ModuleExt};
use liandan_train::data::DataLoader;
use liandan_train::optim::{
    Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, RmsProp, RmsPropConfig, Sgd, SgdConfig,
};
use liandan_train::sched::{CosineAnnealingLR, ExponentialLR, LrScheduler, StepLR};
use liandan_train::trainer::{plot_history, Accuracy, FitConfig, History, Mode, SchedulerStep};
use liandan_train::Trainer;

use crate::args::{EvalArgs, PlotArgs, TrainArgs};
use crate::common::{
    build_model, check_fits, classifies, dataset, default_epochs, default_monitor, load_weights, loss_for, open_data, pick_device, precision_note,
};
use crate::datasets::Pixels;
use crate::Failure;

pub fn train(a: &TrainArgs) -> Result<(), Failure> {
    let spec = zoo::spec(&a.model)?;
    let epochs = a.epochs.unwrap_or(default_epochs(spec));
    if let Some(c) = a.clip_grad_norm.filter(|c| !(c.is_finite() && *c > 0.0)) {
        return Err(Failure::usage(format!("--clip-grad-norm {c}: give a positive norm such as 1.0")));
    }
    let (device, why) = pick_device(a.data.device.as_deref())?;
    check_fits(spec, dataset(&a.data, spec))?;
    let (train_set, val_set, what) = open_data(dataset(&a.data, spec), a.data.max_samples, Pixels::of(spec))?;
    let batch_size = a.batch_size.unwrap_or(spec.input_shape[0]);
    let out = a.out.clone().unwrap_or_else(|| Path::new("runs").join(spec.name));
    check_writable(&out)?;
    let sample_shape = train_set.get(0)?.shape;
    let model = build_model(spec, &sample_shape, &device, a.seed)?;
    let mut optimizer = make_optimizer(a.optimizer.as_deref(), a.lr, spec, model.named_parameters())?;
    let scheduler = make_scheduler(a.scheduler.as_deref(), spec, &mut *optimizer, epochs)?;

    println!("device: {device} ({why})");
    println!("data: {what}; {} training, {} validation samples", train_set.len(), val_set.len());
    let cpu = liandan_nn::Device::cpu();
    let table = summary::summary(&build_model(spec, &sample_shape, &cpu, a.seed)?, &[1].iter().chain(&sample_shape).copied().collect::<Vec<_>>(), &cpu)?;
    print!("{}: {}\n{table}", spec.name, spec.architecture);
    let group = &optimizer.param_groups()[0];
    let accumulated = match a.accumulate {
        1 => String::new(),
        n => format!(", {n} batches per optimizer step (as one batch of {})", n * batch_size),
    };
    println!(
        "optimizer: {} lr {}, scheduler: {}, batch size {batch_size}{accumulated}",
        optimizer_name(a.optimizer.as_deref(), spec),
        group.lr,
        a.scheduler.as_deref().unwrap_or(default_scheduler(spec))
    );
    println!("precision: {}", precision_note(&device, a.precision));

    let train_loader = DataLoader::new(train_set, batch_size, &device)?.shuffle(a.seed);
    let val_loader = DataLoader::new(val_set, 1000.max(batch_size), &device)?;
    let mut trainer = Trainer::with_boxed(model, Box::new(loss_for(spec)), optimizer);
    if classifies(spec) {
        trainer = trainer.with_metric(Accuracy::new());
    }
    if let Some(s) = scheduler {
        trainer = trainer.with_boxed_scheduler(s, SchedulerStep::Epoch);
    }
    let mut config = FitConfig::new(epochs);
    config.patience = a.patience;
    config.monitor = a.monitor.clone().unwrap_or_else(|| default_monitor(spec).to_string());
    config.mode = Mode::for_metric(&config.monitor);
    config.checkpoint_dir = Some(out.clone());
    config.log_interval = a.log_interval;
    config.seed = a.seed;
    config.resume = a.resume;
    config.limit_batches = a.limit_batches;
    config.stop = Some(ctrl_c()?);
    config.precision = a.precision;
    config.accumulate = a.accumulate;
    config.clip_grad_norm = a.clip_grad_norm;
    config.detect_anomaly = a.detect_anomaly;
    let started = Instant::now();
    let history = trainer.fit(&train_loader, Some(&val_loader), &config)?;
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    if let Some((epoch, v)) = history.best(&config.monitor, config.mode) {
        println!("best {} {v:.4} at epoch {epoch}", config.monitor);
    }
    println!("checkpoint (best model, a state dict PyTorch loads): {}", out.join("best.safetensors").display());
    println!("training state (continue with --resume):            {}", out.join("last.safetensors").display());
    println!("history:                                             {}, {}", out.join("history.csv").display(), out.join("history.json").display());
    println!("plot:                                                {}", out.join("history.png").display());
    Ok(())
}

/// The first Ctrl-C asks `fit` to stop after the current step and save; a second one quits
/// at once.
fn ctrl_c() -> Result<Arc<AtomicBool>, Failure> {
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    ctrlc::set_handler(move || {
        if seen.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nCtrl-C: finishing this step and saving the training state (press again to quit at once)");
    })
    .map_err(|e| Failure { code: 1, message: format!("cannot install the Ctrl-C handler: {e}") })?;
    Ok(flag)
}

/// Creates `dir` and proves we can write in it, before any training time is spent.
fn check_writable(dir: &Path) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::usage(format!("cannot write to {} ({e}); pass --out with a directory you can write", dir.display()));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(format!(".liandan-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

pub fn optimizer_name<'a>(flag: Option<&'a str>, spec: &ZooSpec) -> &'a str {
    flag.unwrap_or(match spec.optimizer {
        OptimizerSpec::Sgd { .. } => "sgd",
        OptimizerSpec::Adadelta { .. } => "adadelta",
        OptimizerSpec::Adam { .. } => "adam",
        OptimizerSpec::AdamW { .. } => "adamw",
    })
}

/// The optimizer `--optimizer` names (default: the model's), with `--lr` or the model's lr.
fn make_optimizer(flag: Option<&str>, lr: Option<f64>, spec: &ZooSpec, params: Vec<(String, liandan_nn::Tensor)>) -> Result<Box<dyn Optimizer>, Failure> {
    let (default_lr, momentum, wd) = match spec.optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay } => (lr, momentum, weight_decay),
        OptimizerSpec::Adadelta { lr } | OptimizerSpec::Adam { lr } | OptimizerSpec::AdamW { lr } => (lr, 0.0, 0.0),
    };
    let name = optimizer_name(flag, spec);
    let lr = match lr {
        Some(lr) if !(lr.is_finite() && lr > 0.0) => return Err(Failure::usage(format!("--lr {lr}: give a positive learning rate such as 0.01"))),
        Some(lr) => lr,
        None if name == optimizer_name(None, spec) => default_lr,
        None => return Err(Failure::usage(format!("--optimizer {name} needs --lr (the model's default lr is for {})", optimizer_name(None, spec)))),
    };
    Ok(match name.to_ascii_lowercase().as_str() {
        "sgd" => Box::new(Sgd::new(params, SgdConfig { lr, momentum, weight_decay: wd, ..SgdConfig::default() })?),
        "adadelta" => Box::new(Adadelta::new(params, AdadeltaConfig { lr, ..AdadeltaConfig::default() })?),
        "adam" => Box::new(Adam::new(params, AdamConfig::adam(lr))?),
        "adamw" => Box::new(AdamW::new(params, AdamWConfig::new(lr))?),
        "rmsprop" => Box::new(RmsProp::new(params, RmsPropConfig { lr, ..RmsPropConfig::default() })?),
        "adagrad" => Box::new(Adagrad::new(params, AdagradConfig { lr, ..AdagradConfig::default() })?),
        other => return Err(Failure::usage(format!("unknown optimizer `{other}`: use sgd, adam, adamw, adadelta, rmsprop or adagrad"))),
    })
}

fn default_scheduler(spec: &ZooSpec) -> &'static str {
    if spec.step_lr_gamma.is_some() {
        "step"
    } else {
        "none"
    }
}

/// The scheduler `--scheduler` names: `none`, `step[:GAMMA]`, `exponential:GAMMA`, `cosine`.
fn make_scheduler(flag: Option<&str>, spec: &ZooSpec, opt: &mut dyn Optimizer, epochs: usize) -> Result<Option<Box<dyn LrScheduler>>, Failure> {
    let text = flag.unwrap_or(default_scheduler(spec));
    let (kind, arg) = text.split_once(':').map_or((text, None), |(k, a)| (k, Some(a)));
    let gamma = |default: Option<f64>| -> Result<f64, Failure> {
        let bad = || Failure::usage(format!("--scheduler {text}: give the decay as a number in (0, 1], e.g. step:0.7"));
        match arg {
            Some(a) => a.parse::<f64>().ok().filter(|g| *g > 0.0 && *g <= 1.0).ok_or_else(bad),
            None => default.ok_or_else(bad),
        }
    };
    Ok(match kind {
        "none" => None,
        "step" => Some(Box::new(StepLR::new(opt, 1, gamma(Some(spec.step_lr_gamma.unwrap_or(0.7)))?)?)),
        "exponential" => Some(Box::new(ExponentialLR::new(opt, gamma(None)?)?)),
        "cosine" => Some(Box::new(CosineAnnealingLR::new(opt, epochs as u64, 0.0)?)),
        _ => return Err(Failure::usage(format!("unknown scheduler `{text}`: use none, step[:GAMMA], exponential:GAMMA or cosine"))),
    })
}

/// `liandan eval`: loss and accuracy of a checkpoint on the validation split of `--data` (the
/// vae: its loss, BCE + KL per image).
pub fn eval(a: &EvalArgs) -> Result<(), Failure> {
    let spec = zoo::spec(&a.model)?;
    let (device, why) = pick_device(a.data.device.as_deref())?;
    check_fits(spec, dataset(&a.data, spec))?;
    let (_, val_set, what) = open_data(dataset(&a.data, spec), a.data.max_samples, Pixels::of(spec))?;
    let model = build_model(spec, &val_set.get(0)?.shape, &device, 0)?;
    load_weights(&model, &a.checkpoint, &device)?;
    let n = val_set.len();
    let loader = DataLoader::new(val_set, a.batch_size, &device)?;
    let optimizer = Sgd::new(Vec::<(String, liandan_nn::Tensor)>::new(), SgdConfig::default())?; // evaluate never steps it
    let mut trainer = Trainer::new(model, loss_for(spec), optimizer);
    if classifies(spec) {
        trainer = trainer.with_metric(Accuracy::new());
    }
    println!("device: {device} ({why})");
    let values = trainer.evaluate(&loader)?;
    let get = |k: &str| values.iter().find(|(n, _)| n == k).map_or(f64::NAN, |(_, v)| *v);
    let result =
        if classifies(spec) { format!("loss {:.4}, accuracy {:.4}", get("loss"), get("acc")) } else { format!("loss {:.4} (BCE + KL per image)", get("loss")) };
    println!("{}: {what}, {n} samples: {result}", a.checkpoint.display());
    Ok(())
}

/// `liandan plot HISTORY`: redraws the PNG.
pub fn plot(a: &PlotArgs) -> Result<(), Failure> {
    let history = History::load(&a.history)?;
    let out = a.out.clone().unwrap_or_else(|| a.history.with_file_name("history.png"));
    plot_history(&history, &out)?;
    println!("{}", out.display());
    Ok(())
}
