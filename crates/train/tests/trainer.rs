//! `Trainer::fit` on a tiny model and a tiny synthetic problem, on the CPU: it learns, writes
//! its files, stops early, reports a non-finite loss by epoch and step, and resumes bit for bit
//! (on the CPU, and on the GPU when there is one).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use liandan_train::amp::Precision;
use liandan_train::data::{DataLoader, Dataset, Sample};
use liandan_train::nn::layers::{Dropout, LinearConfig, ReLU, Sequential};
use liandan_train::nn::{checkpoint, manual_seed, Device, ModuleExt, Reduction, Tensor};
use liandan_train::optim::{Adam, AdamConfig};
use liandan_train::sched::StepLR;
use liandan_train::trainer::{state, Accuracy, Callback, FitConfig, History, Mode, ProgressStyle, SchedulerStep, TopK};
use liandan_train::{Error, Result, Trainer};

/// Three classes of points in 8 dimensions, separable by which of three fixed directions
/// scores highest.
struct Blobs(usize);

impl Dataset for Blobs {
    fn len(&self) -> usize {
        self.0
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let input: Vec<f32> = (0..8).map(|j| (((index * 7 + j * 13) % 17) as f32 / 8.5) - 1.0).collect();
        let score = |c: usize| input.iter().enumerate().map(|(j, x)| if j % 3 == c { *x } else { -0.3 * x }).sum::<f32>();
        let target = (0..3).max_by(|&a, &b| score(a).total_cmp(&score(b))).unwrap() as i64;
        Ok(Sample { input, shape: vec![8], target })
    }
}

/// `n` blobs in batches of 16 on the CPU, shuffled by seed 3 when `shuffle`.
fn loader(n: usize, shuffle: bool) -> DataLoader {
    loader_on(&Device::cpu(), n, shuffle)
}

fn loader_on(dev: &Device, n: usize, shuffle: bool) -> DataLoader {
    let l = DataLoader::new(Blobs(n), 16, dev).unwrap();
    if shuffle {
        l.shuffle(3)
    } else {
        l
    }
}

/// liandan's random generator is global to the process (as PyTorch's), and the test harness
/// runs tests on several threads: each test holds this lock so that none reseeds another's.
static RNG: Mutex<()> = Mutex::new(());

fn model(dev: &Device) -> Sequential {
    manual_seed(1);
    Sequential::new().push(LinearConfig::new(8, 32).init(dev).unwrap()).push(ReLU).push(Dropout::new(0.2)).push(LinearConfig::new(32, 3).init(dev).unwrap())
}

/// A trainer of a fresh model (always the same initial weights) with Adam and StepLR.
fn trainer(callback: Recorder) -> Trainer<Sequential> {
    trainer_on(&Device::cpu(), callback)
}

fn trainer_on(dev: &Device, callback: Recorder) -> Trainer<Sequential> {
    let m = model(dev);
    let mut opt = Adam::new(m.named_parameters(), AdamConfig::adam(0.01)).unwrap();
    let sched = StepLR::new(&mut opt, 1, 0.9).unwrap();
    Trainer::new(m, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt)
        .with_metric(Accuracy::new())
        .with_metric(TopK::new(2))
        .with_scheduler(sched, SchedulerStep::Epoch)
        .with_callback(callback)
}

/// Records every step's loss, and sets `stop` once `stop_after` steps have run.
#[derive(Clone, Default)]
struct Recorder {
    losses: Arc<Mutex<Vec<(u64, f64)>>>,
    stop: Option<(Arc<AtomicBool>, u64)>,
}

impl Callback for Recorder {
    fn on_losses(&mut self, _: usize, first_step: u64, losses: &[f64]) -> Result<()> {
        let mut all = self.losses.lock().unwrap();
        all.extend(losses.iter().enumerate().map(|(i, l)| (first_step + i as u64, *l)));
        if let Some((flag, after)) = &self.stop {
            if all.len() as u64 >= *after {
                flag.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

fn config(epochs: usize, dir: &std::path::Path) -> FitConfig {
    let mut c = FitConfig::new(epochs);
    c.checkpoint_dir = Some(dir.to_path_buf());
    c.log_interval = 1;
    c.seed = 42;
    c.progress = ProgressStyle::Quiet;
    c
}

fn weights(t: &Trainer<Sequential>) -> Vec<(String, Vec<u32>)> {
    t.model().state_dict().into_iter().map(|(n, w)| (n, w.to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect())).collect()
}

#[test]
fn fit_learns_and_writes_checkpoints_history_and_plot() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut t = trainer(Recorder::default());
    let mut c = config(3, dir.path());
    c.monitor = "val_acc".into();
    c.mode = Mode::Max;
    let h = t.fit(&loader(192, true), Some(&loader(48, false)), &c).unwrap();
    assert_eq!(h.columns, ["epoch", "lr", "loss", "acc", "top2", "val_loss", "val_acc", "val_top2", "time_s"]);
    assert_eq!(h.column("epoch").unwrap(), [1.0, 2.0, 3.0]);
    let loss = h.column("loss").unwrap();
    assert!(loss[2] < loss[0], "the loss went down: {loss:?}");
    assert!(h.last("val_acc").unwrap() > 0.6, "{h:?}");
    assert!(h.last("val_top2").unwrap() >= h.last("val_acc").unwrap());
    // StepLR(gamma 0.9) stepped after each epoch: the lr each epoch trained with.
    let lr = h.column("lr").unwrap();
    assert!((lr[1] - 0.009).abs() < 1e-12 && (lr[2] - 0.0081).abs() < 1e-12, "{lr:?}");
    for f in ["best.safetensors", "last.safetensors", "history.csv", "history.json", "history.png"] {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
    // best.safetensors is a plain state dict of the best epoch's model.
    let best = checkpoint::load(dir.path().join("best.safetensors"), &Device::cpu()).unwrap();
    let names: Vec<_> = best.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["0.bias", "0.weight", "3.bias", "3.weight"]);
    assert_eq!(History::load(&dir.path().join("history.json")).unwrap(), h);
    assert_eq!(History::load(&dir.path().join("history.csv")).unwrap().rows.len(), 3);
    let png = std::fs::read(dir.path().join("history.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // evaluate agrees with the last epoch's validation when the model is the last epoch's.
    let eval = t.evaluate(&loader(48, false)).unwrap();
    assert_eq!(eval[0].0, "loss");
    assert!((eval[1].1 - h.last("val_acc").unwrap()).abs() < 1e-12);
    let out = t.predict(&loader(20, false)).unwrap();
    assert_eq!(out.shape(), &[20, 3]);
}

#[test]
fn a_run_resumed_mid_epoch_matches_the_uninterrupted_run_bit_for_bit() {
    resumed_run_matches_bit_for_bit(&Device::cpu());
}

/// The GPU runs the same kernels in the same order either way, and its dropout masks come from
/// the checkpointed generator state, so the resumed run is bit for bit the same there too.
#[test]
fn a_run_resumed_mid_epoch_on_the_gpu_matches_the_uninterrupted_run_bit_for_bit() {
    if let Some(gpu) = common::gpu() {
        resumed_run_matches_bit_for_bit(&gpu);
    }
}

fn resumed_run_matches_bit_for_bit(dev: &Device) {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let straight_dir = tempfile::tempdir().unwrap();
    let straight = Recorder::default();
    let mut a = trainer_on(dev, straight.clone());
    let ha = a.fit(&loader_on(dev, 100, true), Some(&loader_on(dev, 30, false)), &config(3, straight_dir.path())).unwrap();

    // Stopped after step 11 (the flag is set as step 10's loss is read, and seen after the
    // next step): epoch 2, step 4 of 7. Then resumed by a fresh process's worth
    // of objects: a new model with the initial weights, a new optimizer and scheduler.
    let dir = tempfile::tempdir().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let first = Recorder { stop: Some((flag.clone(), 10)), ..Default::default() };
    let mut c = config(3, dir.path());
    c.stop = Some(flag);
    let err = trainer_on(dev, first.clone()).fit(&loader_on(dev, 100, true), Some(&loader_on(dev, 30, false)), &c).unwrap_err();
    assert!(matches!(err, Error::Interrupted { epoch: 2, step: 4, saved: Some(_) }), "{dev}: {err}");
    let second = Recorder::default();
    let mut b = trainer_on(dev, second.clone());
    let mut c = config(3, dir.path());
    c.resume = true;
    let hb = b.fit(&loader_on(dev, 100, true), Some(&loader_on(dev, 30, false)), &c).unwrap();

    let mut resumed = first.losses.lock().unwrap().clone();
    resumed.extend(second.losses.lock().unwrap().iter().copied());
    let bits = |v: &[(u64, f64)]| v.iter().map(|(s, l)| (*s, l.to_bits())).collect::<Vec<_>>();
    assert_eq!(bits(&resumed), bits(&straight.losses.lock().unwrap()), "{dev}");
    assert_eq!(weights(&b), weights(&a), "{dev}");
    // The history (time aside) is the same too, including the interrupted epoch's training loss.
    for col in ["loss", "acc", "val_loss", "val_acc", "lr"] {
        assert_eq!(ha.column(col), hb.column(col), "{dev}: {col}");
    }
}

#[test]
fn early_stopping_waits_patience_epochs_without_improvement() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let dev = Device::cpu();
    let m = model(&dev);
    // lr 0: nothing changes, so val_loss never improves after the first epoch.
    let opt = Adam::new(m.named_parameters(), AdamConfig::adam(0.0)).unwrap();
    let mut t = Trainer::new(m, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt);
    let mut c = config(10, dir.path());
    c.patience = Some(2);
    let h = t.fit(&loader(32, true), Some(&loader(16, false)), &c).unwrap();
    assert_eq!(h.len(), 3);
}

#[test]
fn a_non_finite_loss_stops_training_naming_epoch_and_step() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let dev = Device::cpu();
    let m = model(&dev);
    let opt = Adam::new(m.named_parameters(), AdamConfig::adam(0.01)).unwrap();
    let calls = AtomicUsize::new(0);
    // The 5th loss (epoch 2, step 2 with 3 batches per epoch) is NaN.
    let loss = move |out: &Tensor, y: &Tensor| -> Result<Tensor> {
        let l = out.cross_entropy(y, Reduction::Mean)?;
        Ok(if calls.fetch_add(1, Ordering::SeqCst) == 4 { l.mul_scalar(f64::NAN)? } else { l })
    };
    let mut t = Trainer::new(m, loss, opt);
    let mut c = FitConfig::new(5);
    c.log_interval = 4;
    c.progress = ProgressStyle::Quiet;
    c.monitor = "loss".into();
    let err = t.fit(&loader(48, true), None, &c).unwrap_err();
    assert!(matches!(err, Error::NonFinite { epoch: 2, step: 2, .. }), "{err}");
    assert!(err.to_string().contains("epoch 2, step 2"), "{err}");
}

#[test]
fn bad_settings_are_errors_not_panics() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut t = trainer(Recorder::default());
    assert!(DataLoader::new(Blobs(8), 0, &Device::cpu()).is_err());
    let mut c = config(1, dir.path());
    c.log_interval = 0;
    assert!(t.fit(&loader(8, true), None, &c).unwrap_err().to_string().contains("log_interval is 0"));
    let mut c = config(1, dir.path());
    c.monitor = "val_f1".into();
    let err = t.fit(&loader(8, true), Some(&loader(8, false)), &c).unwrap_err().to_string();
    assert!(err.contains("cannot monitor `val_f1`") && err.contains("val_acc"), "{err}");
    let mut c = config(1, dir.path());
    c.monitor = "loss".into();
    c.resume = true;
    let err = t.fit(&loader(8, true), None, &c).unwrap_err().to_string();
    assert!(err.contains("no training state"), "{err}");
    // A plain model checkpoint is not a training state.
    t.model().save(dir.path().join("last.safetensors")).unwrap();
    let err = t.fit(&loader(8, true), None, &c).unwrap_err().to_string();
    assert!(err.contains("not a training state"), "{err}");
}

#[test]
fn top_k_counts_the_label_among_the_k_highest_scores() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    use liandan_train::trainer::Metric;
    let dev = Device::cpu();
    let out = Tensor::from_vec(vec![0.1f32, 0.5, 0.4, 0.9, 0.05, 0.05, 0.2, 0.3, 0.5], &[3, 3], &dev).unwrap();
    let y = Tensor::from_vec(vec![2i64, 0, 0], &[3], &dev).unwrap();
    let (mut top1, mut top2) = (Accuracy::new(), TopK::new(2));
    top1.update(&out, &y).unwrap();
    top2.update(&out, &y).unwrap();
    assert_eq!(top1.compute().unwrap(), 1.0 / 3.0);
    assert_eq!(top2.compute().unwrap(), 2.0 / 3.0);
}

/// The longest legal file name (255 bytes): the temporary file of an atomic write must not be
/// named after it (that added about 12 bytes and failed with "File name too long").
#[test]
fn a_plot_saves_under_a_file_name_of_255_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = History::default();
    for epoch in 1..=3 {
        h.push(&[("epoch".to_string(), epoch as f64), ("loss".to_string(), 1.0 / epoch as f64)]);
    }
    let name = format!("{}.png", "h".repeat(255 - ".png".len()));
    liandan_train::trainer::plot_history(&h, &dir.path().join(&name)).unwrap();
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(entries, [name]);
}

/// A resume keeps what it was started with: the caller's settings are read back from both
/// checkpoints, and a resume with another batch size, validation set or precision is refused,
/// naming the saved value and the new one.
#[test]
fn a_resume_that_changes_the_run_is_refused_naming_both_values() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(1, dir.path());
    c.settings.insert("model".into(), "blobs".into());
    trainer(Recorder::default()).fit(&loader(64, true), Some(&loader(32, false)), &c).unwrap();
    let saved = state::saved_run(&dir.path().join("last.safetensors")).unwrap();
    assert_eq!((saved.epochs_done, saved.batch, saved.seed), (1, 0, 42));
    assert_eq!(saved.settings["model"], "blobs");
    assert_eq!(saved.lrs, [0.01 * 0.9]); // after the scheduler's step
    let (_, meta) = checkpoint::load_with_metadata(dir.path().join("best.safetensors"), &Device::cpu()).unwrap();
    assert_eq!(state::settings(&meta)["model"], "blobs");

    let mut c = config(2, dir.path());
    c.resume = true;
    let batch32 = DataLoader::new(Blobs(64), 32, &Device::cpu()).unwrap().shuffle(3);
    for (train, val, precision, want) in [
        (&batch32, loader(32, false), Precision::F32, "batch size 16 (this run: 32)"),
        (&loader(64, true), loader(16, false), Precision::F32, "validation samples 32 (this run: 16)"),
        (&loader(64, true), loader(32, false), Precision::BF16, "precision f32 (this run: bf16)"),
    ] {
        c.precision = precision;
        let err = trainer(Recorder::default()).fit(train, Some(&val), &c).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    // As it was started, it goes on.
    c.precision = Precision::F32;
    let h = trainer(Recorder::default()).fit(&loader(64, true), Some(&loader(32, false)), &c).unwrap();
    assert_eq!(h.column("epoch").unwrap(), [1.0, 2.0]);
}
