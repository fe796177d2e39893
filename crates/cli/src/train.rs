//! `liandan train`, `eval` and `plot`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use liandan_nn::zoo;
use liandan_nn::zoo::{OptimizerSpec, ZooSpec};
use liandan_nn::{summary, ModuleExt};
use liandan_train::data::{bundled_mnist_raw, DataLoader, Mnist, Split};
use liandan_train::distributed::Distributed;
use liandan_train::optim::{
    Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, RmsProp, RmsPropConfig, Sgd, SgdConfig,
};
use liandan_train::sched::{CosineAnnealingLR, ExponentialLR, LrScheduler, StepLR};
use liandan_train::trainer::{plot_history, round_significant, state, Accuracy, FitConfig, History, Mode, ProgressStyle, SchedulerStep};
use liandan_train::Trainer;

use crate::args::{EvalArgs, PlotArgs, TrainArgs};
use crate::common::synthetic_data;
use crate::common::{check_fits, classifies, dataset, load_weights, loss_for, open_part, pick_device, precision_note, Part};
use crate::datasets::Pixels;
use crate::output::{note, say, text};
use crate::own_data::{self, Opened};
use crate::resume::{resolve, Settings};
use crate::{run_dir, Failure};

/// `liandan train`, alone or as one rank of an MPI job (`mpirun -n N liandan train ...`);
/// `given` names the flags given on the command line (a resume checks them against the saved
/// run).
pub fn train(a: &TrainArgs, given: &[String]) -> Result<(), Failure> {
    if let Some(n) = a.gpus {
        return crate::ranks::launch(n);
    }
    match crate::ranks::join()? {
        Some(dist) => crate::ranks::or_abort(&dist, "train", train_as(a, given, Some(&dist))),
        None => train_as(a, given, None),
    }
}

fn train_as(a: &TrainArgs, given: &[String], dist: Option<&Distributed>) -> Result<(), Failure> {
    if let Some(c) = a.clip_grad_norm.filter(|c| !(c.is_finite() && *c > 0.0)) {
        return Err(Failure::usage(format!("--clip-grad-norm {c}: give a positive norm such as 1.0")));
    }
    // An unknown model is refused before its run directory (and lock) is made.
    zoo::spec(&a.model)?;
    let out = a.out.clone().unwrap_or_else(|| Path::new("runs").join(&a.model));
    // Rank 0 alone holds the run directory and writes in it; the others only read a resume's state.
    let root = dist.is_none_or(Distributed::is_root);
    let _lock = if root { Some(run_dir::lock(&out)?) } else { None };
    let last = out.join("last.safetensors");
    let saved = match a.resume {
        true if !last.is_file() => {
            return Err(Failure::usage(format!("{} holds no training state (last.safetensors) to resume from; train without --resume first", out.display())))
        }
        true => Some(state::saved_run(&last)?),
        false => {
            if root {
                run_dir::check_fresh(&out, a.overwrite)?;
            }
            None
        }
    };
    let s = resolve(a, given, saved.as_ref().map(|r| &r.settings), &out)?;
    let spec = s.model;
    let (device, why) = match dist {
        Some(d) => crate::ranks::device(d, a.data.device.as_deref(), pick_device(a.data.device.as_deref())?),
        None => pick_device(a.data.device.as_deref())?,
    };
    crate::settings::gpu_switches(&device, a.autotune, a.conv_tf32)?;
    let Opened { train: train_set, val: val_set, what, info } = match s.data.as_str() {
        "synthetic" => {
            let (train, val, what) = synthetic_data(spec, s.max_samples)?;
            Opened { train, val, what, info: None }
        }
        data => own_data::open(data, &s.own, spec, s.max_samples, s.seed)?,
    };
    let sample_shape = train_set.get(0)?.shape;
    let model = own_data::build(spec, &sample_shape, info.as_ref(), &device, s.seed)?;
    let mut optimizer = make_optimizer(&s, spec, model.named_parameters())?;
    let scheduler = make_scheduler(&s.scheduler, &mut *optimizer, s.epochs)?;
    if a.overwrite && root {
        run_dir::clear(&out)?;
    }

    let ranks = dist.map(|d| crate::ranks::describe(d, &device, &why));
    if root {
        match &ranks {
            Some(lines) => say!("data parallel over {} MPI ranks, each on its share of every epoch:\n  {}", lines.len(), lines.join("\n  "))?,
            None => say!("device: {device} ({why})")?,
        }
        say!("data: {what}; {} training, {} validation samples", train_set.len(), val_set.len())?;
        let head = match &info {
            Some(i) => format!("; its head sized to the {} classes", i.classes.len()),
            None => String::new(),
        };
        say!("model: {} ({} parameters): {}{head}", spec.name, thousands(model.num_parameters()), spec.architecture)?;
        if a.summary {
            let cpu = liandan_nn::Device::cpu();
            let input: Vec<usize> = [1].iter().chain(&sample_shape).copied().collect();
            text(&summary::summary(&own_data::build(spec, &sample_shape, info.as_ref(), &cpu, s.seed)?, &input, &cpu)?.to_string())?;
        }
        let accumulated = match s.accumulate {
            1 => String::new(),
            n => format!(", {n} batches per optimizer step (as one batch of {})", n * s.batch_size),
        };
        let accumulated = match dist.map_or(1, Distributed::size) {
            1 => accumulated,
            n => format!(" per rank{accumulated}; {n} ranks step as one batch of {}", n * s.accumulate * s.batch_size),
        };
        // On a resume the optimizer goes on at the saved run's learning rate, not the one it began with.
        let lr = match saved.as_ref().and_then(|r| r.lrs.first()) {
            Some(&now) => format!("{} (where the run stands; it began at {})", round_significant(now, 6), round_significant(s.lr, 6)),
            None => round_significant(s.lr, 6).to_string(),
        };
        if let Some(r) = &saved {
            let at = if r.batch > 0 { format!(", batch {}", r.batch + 1) } else { String::new() };
            say!("resuming {}: epoch {}{at} of {}", out.display(), r.epochs_done + 1, s.epochs)?;
        }
        say!("optimizer: {} lr {lr}, scheduler: {}, batch size {}{accumulated}", s.optimizer, s.scheduler, s.batch_size)?;
        say!("precision: {}", precision_note(&device, s.precision, a.autocast_min_ops))?;
    }

    let train_loader = DataLoader::new(train_set, s.batch_size, &device)?.shuffle(s.seed);
    let val_loader = DataLoader::new(val_set, 1000.max(s.batch_size), &device)?;
    let mut trainer = Trainer::with_boxed(model, Box::new(loss_for(spec)), optimizer);
    if classifies(spec) {
        trainer = trainer.with_metric(Accuracy::new());
    }
    if let Some(d) = dist {
        trainer = trainer.with_distributed(d.clone());
    }
    if let Some(sched) = scheduler {
        trainer = trainer.with_boxed_scheduler(sched, SchedulerStep::Epoch);
    }
    let mut config = fit_config(a, &s, &out, dist)?;
    config.metadata = info.map(|i| i.to_metadata()).unwrap_or_default();
    let started = Instant::now();
    let history = trainer.fit(&train_loader, Some(&val_loader), &config)?;
    if !root {
        return Ok(());
    }
    say!("done in {:.1} s", started.elapsed().as_secs_f64())?;
    if let Some((epoch, v)) = history.best(&config.monitor, config.mode) {
        say!("best {} {v:.4} at epoch {epoch}", config.monitor)?;
    }
    say!("checkpoint (best model, a state dict PyTorch loads): {}", out.join("best.safetensors").display())?;
    say!("training state (continue with --resume):            {}", last.display())?;
    say!("history:                                             {}, {}", out.join("history.csv").display(), out.join("history.json").display())?;
    say!("plot:                                                {}", out.join("history.png").display())?;
    if a.autotune {
        crate::settings::autotune_report(&device)?;
    }
    if a.board.tensorboard {
        say!("tensorboard event file (view with `tensorboard --logdir {}`)", out.display())?;
    }
    Ok(())
}

/// What `fit` is asked to do, the settings kept with the run among it.
fn fit_config(a: &TrainArgs, s: &Settings, out: &Path, dist: Option<&Distributed>) -> Result<FitConfig, Failure> {
    let mut config = FitConfig::new(s.epochs);
    config.patience = s.patience;
    config.monitor = s.monitor.clone();
    config.mode = Mode::for_metric(&s.monitor);
    config.checkpoint_dir = Some(out.to_path_buf());
    config.log_interval = a.log_interval;
    config.seed = s.seed;
    config.resume = a.resume;
    config.limit_batches = s.limit_batches;
    config.stop = Some(ctrl_c(dist)?);
    config.precision = s.precision;
    config.autocast_min_ops = a.autocast_min_ops;
    config.accumulate = s.accumulate;
    config.clip_grad_norm = s.clip_grad_norm;
    config.detect_anomaly = a.detect_anomaly;
    config.settings = s.to_map();
    config.tensorboard = a.board.config(out);
    Ok(config)
}

/// `1199882` as `1,199,882`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first Ctrl-C asks `fit` to stop after the current step and save; a second one quits
/// at once (every rank of an MPI job: `mpirun` passes Ctrl-C on to each).
fn ctrl_c(dist: Option<&Distributed>) -> Result<Arc<AtomicBool>, Failure> {
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    // Weak: the handler outlives the run, and a strong reference would keep MPI from being
    // finalized, so that a rank's exit would look like a crash and end the others mid-write.
    let comm = dist.map(|d| Arc::downgrade(d.communicator()));
    let root = dist.is_none_or(Distributed::is_root);
    ctrlc::set_handler(move || {
        if seen.swap(true, Ordering::SeqCst) {
            match comm.as_ref().and_then(Weak::upgrade) {
                Some(c) => c.abort(130),
                None => std::process::exit(130),
            }
        }
        if root {
            note!("\nCtrl-C: finishing this step and saving the training state (press again to quit at once)");
        }
    })
    .map_err(|e| Failure { code: 1, message: format!("cannot install the Ctrl-C handler: {e}") })?;
    Ok(flag)
}

pub fn optimizer_name<'a>(flag: Option<&'a str>, spec: &ZooSpec) -> &'a str {
    flag.unwrap_or(match spec.optimizer {
        OptimizerSpec::Sgd { .. } => "sgd",
        OptimizerSpec::Adadelta { .. } => "adadelta",
        OptimizerSpec::Adam { .. } => "adam",
        OptimizerSpec::AdamW { .. } => "adamw",
    })
}

/// The optimizer of the settings, over `params`, with the model's momentum and weight decay.
fn make_optimizer(s: &Settings, spec: &ZooSpec, params: Vec<(String, liandan_nn::Tensor)>) -> Result<Box<dyn Optimizer>, Failure> {
    let (momentum, wd) = match spec.optimizer {
        OptimizerSpec::Sgd { momentum, weight_decay, .. } => (momentum, weight_decay),
        OptimizerSpec::Adadelta { .. } | OptimizerSpec::Adam { .. } | OptimizerSpec::AdamW { .. } => (0.0, 0.0),
    };
    let lr = s.lr;
    Ok(match s.optimizer.as_str() {
        "sgd" => Box::new(Sgd::new(params, SgdConfig { lr, momentum, weight_decay: wd, ..SgdConfig::default() })?),
        "adadelta" => Box::new(Adadelta::new(params, AdadeltaConfig { lr, ..AdadeltaConfig::default() })?),
        "adam" => Box::new(Adam::new(params, AdamConfig::adam(lr))?),
        "adamw" => Box::new(AdamW::new(params, AdamWConfig::new(lr))?),
        "rmsprop" => Box::new(RmsProp::new(params, RmsPropConfig { lr, ..RmsPropConfig::default() })?),
        "adagrad" => Box::new(Adagrad::new(params, AdagradConfig { lr, ..AdagradConfig::default() })?),
        other => return Err(Failure::usage(format!("unknown optimizer `{other}`: use sgd, adam, adamw, adadelta, rmsprop or adagrad"))),
    })
}

/// The scheduler of a checked spec (`resume::canonical_scheduler`): `none`, `step:GAMMA`
/// (StepLR every epoch), `exponential:GAMMA`, `cosine` (over `epochs`).
fn make_scheduler(text: &str, opt: &mut dyn Optimizer, epochs: usize) -> Result<Option<Box<dyn LrScheduler>>, Failure> {
    let (kind, gamma) = text.split_once(':').map_or((text, 1.0), |(k, g)| (k, g.parse().unwrap_or(1.0)));
    Ok(match kind {
        "step" => Some(Box::new(StepLR::new(opt, 1, gamma)?)),
        "exponential" => Some(Box::new(ExponentialLR::new(opt, gamma)?)),
        "cosine" => Some(Box::new(CosineAnnealingLR::new(opt, epochs as u64, 0.0)?)),
        _ => None,
    })
}

/// `liandan eval`: loss and accuracy of a checkpoint on one split of `--data` (default: the
/// test split; the bundled set's held-out 2,000); the vae: its loss, BCE + KL per image.
pub fn eval(a: &EvalArgs) -> Result<(), Failure> {
    let spec = zoo::spec(&a.model)?;
    let (device, why) = pick_device(a.data.device.as_deref())?;
    let (info, trained) = own_data::checkpoint_info(&a.checkpoint)?;
    // A model of the user's own data reads the data it was trained on unless told otherwise.
    let data = match (&info, &a.data.data, trained.get("data")) {
        (Some(_), None, Some(d)) => d.as_str(),
        _ => dataset(&a.data, spec),
    };
    let part = match a.split.as_deref() {
        Some("train") => Part::Train,
        Some("val") => Part::Val,
        Some(_) => Part::Test,
        None if data == "bundled" || info.is_some() => Part::Val,
        None => Part::Test,
    };
    let (set, what) = match &info {
        Some(info) => {
            let seed = trained.get("seed").and_then(|s| s.parse().ok()).unwrap_or(0);
            own_data::open_for_eval(data, part, info, seed, a.data.max_samples)?
        }
        None => {
            check_fits(spec, data)?;
            open_part(data, part, a.data.max_samples, Pixels::of(spec))?
        }
    };
    let model = own_data::build(spec, &set.get(0)?.shape, info.as_ref(), &device, 0)?;
    let trained = load_weights(&model, &a.checkpoint, &device)?;
    if trained.get("data").is_some_and(|d| d == "bundled") && part == Part::Test && is_mnist_test(data) {
        note!(
            "warning: {} was trained on the bundled set, which is MNIST's test images: it saw 8,000 of the 10,000 evaluated here, \
             so this accuracy overstates it. The 2,000 it did not see: --data bundled --split val",
            a.checkpoint.display()
        );
    }
    let n = set.len();
    let loader = DataLoader::new(set, a.batch_size, &device)?;
    let optimizer = Sgd::new(Vec::<(String, liandan_nn::Tensor)>::new(), SgdConfig::default())?; // evaluate never steps it
    let mut trainer = Trainer::new(model, loss_for(spec), optimizer);
    if classifies(spec) {
        trainer = trainer.with_metric(Accuracy::new());
    }
    say!("device: {device} ({why})")?;
    let values = trainer.evaluate_with_progress(&loader, ProgressStyle::Auto)?;
    let get = |k: &str| values.iter().find(|(n, _)| n == k).map_or(f64::NAN, |(_, v)| *v);
    let split = format!("{part:?}").to_lowercase();
    let result =
        if classifies(spec) { format!("loss {:.4}, accuracy {:.4}", get("loss"), get("acc")) } else { format!("loss {:.4} (BCE + KL per image)", get("loss")) };
    say!("{}: {what}, {split} split, {n} samples: {result}", a.checkpoint.display())
}

/// Whether `data` is MNIST's test split: `mnist`, or a directory whose t10k images are MNIST's
/// (compared with the bundled copy of them).
fn is_mnist_test(data: &str) -> bool {
    if data == "mnist" {
        return true;
    }
    let (Ok(theirs), Ok(ours)) = (Mnist::load(Path::new(data), Split::Test), bundled_mnist_raw()) else {
        return false;
    };
    theirs.labels() == ours.labels() && (0..ours.labels().len()).step_by(997).all(|i| matches!((theirs.pixels(i), ours.pixels(i)), (Ok(a), Ok(b)) if a == b))
}

/// `liandan plot HISTORY`: redraws the PNG.
pub fn plot(a: &PlotArgs) -> Result<(), Failure> {
    let history = History::load(&a.history)?;
    let out = a.out.clone().unwrap_or_else(|| a.history.with_file_name("history.png"));
    plot_history(&history, &out)?;
    say!("{}", out.display())
}
