//! Mixed precision, gradient accumulation and the non-finite checks of `fit`, on the CPU:
//! unscaled f16 and bf16 gradients against f32 ones, a forced f16 overflow that skips exactly
//! its step, N micro-batches against one batch of N*B, a non-finite gradient named by its step,
//! anomaly detection naming the rigged layer, the VAE trained in f16, `mnist_cnn` in f16 and
//! bf16 within a point of f32's validation accuracy, an f16 run resumed with its scaler, the
//! scaler's backward started from its scale, and the default minimum sizes autocast lowers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use liandan_train::amp::{GradScaler, Precision};
use liandan_train::data::{bundled_mnist, DataLoader, Subset, TensorDataset};
use liandan_train::nn::layers::{LinearConfig, ReLU, Sequential};
use liandan_train::nn::{autocast, checkpoint, manual_seed, zoo, DType, Device, ModuleExt, Reduction, Tensor};
use liandan_train::optim::{self, Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use liandan_train::trainer::{Accuracy, Callback, FitConfig, ProgressStyle};
use liandan_train::{Error, Trainer};

mod common;

/// The bundled-MNIST samples `mnist_cnn` trains on for one epoch, and those it validates on
/// (the whole validation split). After 2,048 samples the model was still on the steep part of
/// its learning curve (about 0.90), where the rounding of f16 alone moved the accuracy by two
/// points between builds that only reordered f32 sums; after 4,096 it is at about 0.94 (f32 0.940,
/// f16 0.942, bf16 0.944 on the CPU backend).
const TRAIN: usize = 4096;
const VAL: usize = 2000;

/// The random generator is global: tests that seed it hold this lock.
static RNG: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The zoo model `name`, initialized from seed `seed`.
fn seeded_zoo(name: &str, seed: u64, dev: &Device) -> Box<dyn zoo::ZooModel> {
    manual_seed(seed);
    zoo::build(name, dev).unwrap()
}

#[test]
fn unscaled_low_precision_gradients_match_f32_ones() {
    let _g = lock();
    let dev = Device::cpu();
    // The mlp, not mnist_cnn: with max pooling, a window whose top two values round to one
    // low-precision number picks another maximum than f32 does, and moves that gradient
    // wholesale (measured: 6% of conv2's gradient norm in f16, 20% in bf16); that is a
    // property of the low type, not of the gradients this test checks.
    let model = seeded_zoo("mlp", 3, &dev);
    let x = Tensor::rand(&[8, 1024], 0.0, 1.0, 5, DType::F32, &dev).unwrap();
    let y = Tensor::from_vec((0..8i64).collect::<Vec<_>>(), &[8], &dev).unwrap();
    let grads = |precision: Precision| {
        model.zero_grad();
        let loss = autocast(precision.dtype(), || model.loss(&x, Some(&y))).unwrap();
        assert_eq!(loss.dtype(), DType::F32, "losses are computed in f32");
        let params = model.parameters();
        if precision == Precision::F16 {
            let mut scaler = GradScaler::new();
            scaler.scale(&loss).unwrap().backward().unwrap();
            assert_eq!(scaler.unscale_(&params).unwrap().item_f64().unwrap(), 0.0, "no overflow at scale 2^16");
        } else {
            loss.backward().unwrap();
        }
        model.named_parameters().into_iter().map(|(n, p)| (n, p.grad().unwrap())).collect::<Vec<_>>()
    };
    let f32_grads = grads(Precision::F32);
    // Per tensor, the error's L2 norm relative to the f32 gradient's. Elementwise bounds do not
    // hold: where a pre-activation is within rounding of 0 its ReLU flips, and that unit's
    // gradient is all or nothing. Measured: f16 below 1e-3 for every tensor; bf16 (8 bits of
    // mantissa, 8x coarser) 3e-3 on the last layer and 0.11-0.13 on the two behind ReLUs.
    for (precision, tol) in [(Precision::F16, 1e-2), (Precision::BF16, 0.2)] {
        let got = grads(precision);
        for ((name, g), (_, w)) in got.iter().zip(&f32_grads) {
            assert_eq!(g.dtype(), DType::F32, "{name}: master gradients stay f32");
            let (g, w) = (g.to_vec_f64().unwrap(), w.to_vec_f64().unwrap());
            let err = g.iter().zip(&w).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
            let norm = w.iter().map(|b| b * b).sum::<f64>().sqrt();
            eprintln!("{precision} {name}: relative L2 error {:.2e}", err / norm);
            assert!(err <= tol * norm, "{precision} {name}: relative L2 error {} against f32, above {tol}", err / norm);
        }
    }
}

/// A small classifier of 8 inputs and 3 classes.
/// `unscale_` and `nonfinite_flag` join the gradients (per dtype) to check and divide them in a
/// few kernels: each gradient must come back divided, in its own shape and dtype, a parameter
/// without one must stay without one, and a non-finite element in any gradient of either dtype
/// must raise the flag.
#[test]
fn unscale_divides_each_gradient_and_flags_a_non_finite_one_in_any_of_them() {
    // On the GPU the joined check zeroes its copy in place (a multi-tensor scale by 0).
    for dev in common::devices() {
        unscale_and_flag_on(&dev);
    }
}

fn unscale_and_flag_on(dev: &Device) {
    let shapes: [(&[usize], DType); 5] = [(&[3, 4], DType::F32), (&[5], DType::F16), (&[2, 2, 3], DType::F32), (&[7], DType::F16), (&[1], DType::F32)];
    let make = |poison: Option<(usize, f64)>| {
        let params: Vec<Tensor> = shapes.iter().map(|(s, d)| Tensor::zeros(s, *d, dev).unwrap()).collect();
        let mut want = Vec::new();
        for (k, (p, (shape, dtype))) in params.iter().zip(&shapes).enumerate() {
            let n: usize = shape.iter().product();
            // The fourth parameter has no gradient.
            if k == 3 {
                want.push(None);
                continue;
            }
            let mut v: Vec<f64> = (0..n).map(|i| (i as f64 - 2.0) * 256.0 * (k + 1) as f64).collect();
            if let Some((_, bad)) = poison.filter(|(at, _)| *at == k) {
                v[n - 1] = bad;
            }
            p.set_grad(Some(Tensor::from_f64s(&v, shape, *dtype, dev).unwrap()));
            want.push(Some(v.iter().map(|x| x / 256.0).collect::<Vec<f64>>()));
        }
        (params, want)
    };
    let mut scaler = GradScaler::with_scale(256.0);
    let (params, want) = make(None);
    assert_eq!(liandan_train::amp::nonfinite_flag(&params).unwrap().unwrap().item_f64().unwrap(), 0.0, "all finite");
    assert_eq!(scaler.unscale_(&params).unwrap().item_f64().unwrap(), 0.0, "all finite");
    for (k, (p, w)) in params.iter().zip(&want).enumerate() {
        match w {
            None => assert!(p.grad().is_none(), "parameter {k} had no gradient and must get none"),
            Some(w) => {
                let g = p.grad().unwrap();
                assert_eq!((g.shape(), g.dtype()), (shapes[k].0, shapes[k].1), "parameter {k}'s gradient keeps its shape and dtype");
                assert_eq!(g.to_vec_f64().unwrap(), *w, "parameter {k}'s gradient divided by the scale");
            }
        }
    }
    for k in [0, 1, 2, 4] {
        for bad in [f64::INFINITY, f64::NAN, f64::NEG_INFINITY] {
            let (params, _) = make(Some((k, bad)));
            assert!(liandan_train::amp::nonfinite_flag(&params).unwrap().unwrap().item_f64().unwrap().is_nan(), "{bad} in gradient {k}: nonfinite_flag");
            assert!(scaler.unscale_(&params).unwrap().item_f64().unwrap().is_nan(), "{bad} in gradient {k}: unscale_'s flag");
        }
    }
    let none: Vec<Tensor> = vec![Tensor::zeros(&[2], DType::F32, dev).unwrap()];
    assert!(liandan_train::amp::nonfinite_flag(&none).unwrap().is_none(), "no gradient, no flag");
    assert_eq!(scaler.unscale_(&none).unwrap().item_f64().unwrap(), 0.0, "no gradient: a 0 flag");
}

fn small(dev: &Device) -> Sequential {
    manual_seed(1);
    Sequential::new().push(LinearConfig::new(8, 16).init(dev).unwrap()).push(ReLU).push(LinearConfig::new(16, 3).init(dev).unwrap())
}

/// 4 batches of 8 samples; the inputs of batch `poisoned`, if any, multiplied by `factor`.
fn data(poisoned: Option<usize>, factor: f32, batch: usize) -> DataLoader {
    data_on(poisoned, factor, batch, &Device::cpu())
}

/// [`data`] loaded onto `dev`.
fn data_on(poisoned: Option<usize>, factor: f32, batch: usize, dev: &Device) -> DataLoader {
    let mut inputs: Vec<f32> = (0..32 * 8).map(|i| ((i * 37 % 19) as f32 / 9.5) - 1.0).collect();
    if let Some(b) = poisoned {
        inputs[b * 64..(b + 1) * 64].iter_mut().for_each(|x| *x *= factor);
    }
    let targets = (0..32).map(|i| (i % 3) as i64).collect();
    DataLoader::new(TensorDataset::from_vecs(inputs, targets, &[8]).unwrap(), batch, dev).unwrap()
}

fn quiet(limit: usize, precision: Precision) -> FitConfig {
    let mut c = FitConfig::new(1);
    c.monitor = "loss".into();
    c.progress = ProgressStyle::Quiet;
    c.limit_batches = Some(limit);
    c.precision = precision;
    // Every product in the low type, as `torch.autocast`: these models are small, and the
    // tests are about what f16 does.
    c.autocast_min_ops = Some(0);
    c
}

fn sgd_trainer(model: Sequential) -> Trainer<Sequential> {
    let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() }).unwrap();
    Trainer::new(model, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt)
}

fn weights(t: &Trainer<Sequential>) -> Vec<f64> {
    t.model().parameters().iter().flat_map(|p| p.to_vec_f64().unwrap()).collect()
}

/// On the CPU the host reads the check at each step; on a GPU the device skips the step and
/// the host reads the check later.
#[test]
fn a_forced_f16_overflow_skips_exactly_its_step_and_halves_the_scale() {
    let _g = lock();
    for dev in common::devices() {
        // 1e6 is beyond f16's largest value (65504): batch 2's forward pass overflows.
        let run = |limit: usize| {
            let mut t = sgd_trainer(small(&dev));
            let history = t.fit(&data_on(Some(2), 1e6, 8, &dev), None, &quiet(limit, Precision::F16)).unwrap();
            let s = t.grad_scaler().unwrap();
            (weights(&t), s.get_scale(), s.skipped_steps(), history.last("loss").unwrap())
        };
        let (before, scale, skipped, _) = run(2);
        assert_eq!((scale, skipped), (65536.0, 0), "on {dev}");
        let (after, scale, skipped, loss) = run(3);
        assert_eq!(after, before, "the overflowing step changed no weight on {dev}");
        assert_eq!((scale, skipped), (32768.0, 1), "on {dev}");
        assert!(loss.is_finite(), "the skipped step's loss is left out of the epoch's on {dev}");
        let (next, _, skipped, _) = run(4);
        assert_ne!(next, after, "the step after it trains again on {dev}");
        assert_eq!(skipped, 1, "on {dev}");
    }
}

/// Under the default minimum size every product of the small model stays f32, so an f16 run
/// is an f32 run: the same weights and losses bit for bit, the scaler untouched (the input
/// that overflows f16 overflows nothing).
#[test]
fn an_f16_run_whose_products_stay_f32_trains_as_f32_without_the_scaler() {
    let _g = lock();
    for dev in common::devices() {
        let run = |precision: Precision| {
            let mut t = sgd_trainer(small(&dev));
            let mut c = quiet(4, precision);
            c.autocast_min_ops = None;
            let history = t.fit(&data_on(Some(2), 1e6, 8, &dev), None, &c).unwrap();
            let scaler = t.grad_scaler().map(|s| s.state()).map(|s| (s.scale, s.growth_tracker, s.skipped));
            (weights(&t), history.last("loss").unwrap(), scaler)
        };
        let (w32, loss32, _) = run(Precision::F32);
        let (w16, loss16, scaler) = run(Precision::F16);
        assert_eq!((w16, loss16), (w32, loss32), "on {dev}");
        // A scaled step would count as a good one.
        assert!(scaler.is_none_or(|s| s == (65536.0, 0, 0)), "the scaler did nothing on {dev}: {scaler:?}");
    }
}

/// A run's default minimums lower a convolution from 2^24 operations (mnist_cnn's first, whose
/// low output then feeds the next convolution without casts) while a product of that size
/// stays f32, in f16 and in bf16.
#[test]
fn the_default_minimums_lower_small_convolutions_but_not_small_products() {
    let dev = Device::cpu();
    // 2 x 64 images x 676 positions x 32 outputs x 9 taps: 2^24.6 operations.
    let x = Tensor::rand(&[64, 1, 28, 28], -1.0, 1.0, 1, DType::F32, &dev).unwrap();
    let w = Tensor::rand(&[32, 1, 3, 3], -1.0, 1.0, 2, DType::F32, &dev).unwrap();
    // 2 x 64 x 1024 x 256: 2^25 operations.
    let (a, b) = (Tensor::rand(&[64, 1024], -1.0, 1.0, 3, DType::F32, &dev).unwrap(), Tensor::rand(&[1024, 256], -1.0, 1.0, 4, DType::F32, &dev).unwrap());
    for precision in [Precision::F16, Precision::BF16] {
        let _region = precision.autocast(None).unwrap();
        let conv = x.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1).unwrap();
        assert_eq!(conv.dtype(), precision.dtype(), "the convolution under {precision:?}");
        assert_eq!(a.matmul(&b).unwrap().dtype(), DType::F32, "the product under {precision:?}");
        // Under the convolutions' minimum it stays f32 too.
        let small = x.narrow(0, 0, 32).unwrap().conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1).unwrap();
        assert_eq!(small.dtype(), DType::F32, "the half-batch convolution under {precision:?}");
    }
}

#[test]
fn n_micro_batches_update_as_one_batch_of_n_times_b() {
    let _g = lock();
    let dev = Device::cpu();
    let mut one = sgd_trainer(small(&dev));
    one.fit(&data(None, 1.0, 32), None, &quiet(1, Precision::F32)).unwrap();
    let mut four = sgd_trainer(small(&dev));
    let mut config = quiet(4, Precision::F32);
    config.accumulate = 4;
    four.fit(&data(None, 1.0, 8), None, &config).unwrap();
    let (a, b) = (weights(&one), weights(&four));
    assert_ne!(a, weights(&sgd_trainer(small(&dev))), "the step changed the weights");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= 1e-6, "weight {i}: {x} from one batch of 32, {y} from 4 x 8");
    }
}

#[test]
fn a_non_finite_gradient_stops_training_naming_its_step() {
    let _g = lock();
    let dev = Device::cpu();
    manual_seed(1);
    let model = Sequential::new().push(LinearConfig::new(8, 3).with_bias(false).init(&dev).unwrap());
    let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, ..Default::default() }).unwrap();
    // sqrt(x^2) is finite at 0 but its gradient is 0 * inf: batch 3's zero inputs give NaN.
    let mut t = Trainer::new(model, |out, _| Ok(out.square()?.sqrt()?.mean_all()?), opt);
    match t.fit(&data(Some(2), 0.0, 8), None, &quiet(4, Precision::F32)) {
        Err(Error::NonFiniteGrad { epoch: 1, step: 3 }) => {}
        other => panic!("expected a non-finite gradient at epoch 1, step 3, got {other:?}"),
    }
}

#[test]
fn anomaly_detection_names_the_layer_that_overflows() {
    let _g = lock();
    let dev = Device::cpu();
    let model = small(&dev);
    // Weights of 1e30 in both linear layers: the first one's outputs (about 1e30) are finite,
    // the second one's products (1e60) overflow f32 on every batch.
    for (name, w) in model.named_parameters().iter().filter(|(n, _)| n.ends_with("weight")) {
        w.assign(&Tensor::full(w.shape(), 1e30, DType::F32, &dev).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let mut t = sgd_trainer(model);
    let mut config = quiet(2, Precision::F32);
    config.detect_anomaly = true;
    match t.fit(&data(None, 1.0, 8), None, &config) {
        Err(Error::Anomaly { epoch: 1, step: 1, report }) => {
            assert!(report.contains("op `matmul` in Linear-3 (inputs [[8, 16], [16, 3]]"), "{report}");
        }
        other => panic!("expected an anomaly report at step 1, got {other:?}"),
    }
}

#[test]
fn the_vae_trains_in_f16_without_nan() {
    let _g = lock();
    let dev = Device::cpu();
    let model = seeded_zoo("vae", 2, &dev);
    let mut opt = Adam::new(model.named_parameters(), AdamConfig::adam(1e-3)).unwrap();
    let mut scaler = GradScaler::new();
    let params = model.parameters();
    let mut losses = Vec::new();
    for step in 0..12 {
        let x = Tensor::rand(&[32, 784], 0.0, 1.0, step, DType::F32, &dev).unwrap();
        opt.zero_grad();
        let loss = autocast(DType::F16, || model.loss(&x, None)).unwrap();
        scaler.scale(&loss).unwrap().backward().unwrap();
        let flag = scaler.unscale_(&params).unwrap().item_f64().unwrap();
        if scaler.update(flag).unwrap() {
            opt.step().unwrap();
        }
        losses.push(loss.item_f64().unwrap());
    }
    // The loss is a sum over 784 pixels: at 2^16 its gradients overflow f16, and the scaler
    // backs off a few times before the steps go through, as PyTorch's does.
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!((1..=5).contains(&scaler.skipped_steps()), "skipped {} of 12 steps", scaler.skipped_steps());
    assert!(losses[11] < losses[0], "it learns: {losses:?}");
    for p in &params {
        assert!(p.to_vec_f64().unwrap().iter().all(|v| v.is_finite()));
    }
}

/// Records every step's loss, and sets `stop` once `after` losses have been read back.
#[derive(Clone)]
struct Recorder {
    losses: Arc<Mutex<Vec<(u64, u64)>>>,
    stop: Option<(Arc<AtomicBool>, usize)>,
}

impl Callback for Recorder {
    fn on_losses(&mut self, _: usize, first_step: u64, losses: &[f64]) -> liandan_train::Result<()> {
        let mut all = self.losses.lock().unwrap();
        all.extend(losses.iter().enumerate().map(|(i, l)| (first_step + i as u64, l.to_bits())));
        if let Some((flag, after)) = &self.stop {
            flag.store(all.len() >= *after, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[test]
fn an_f16_run_resumed_mid_epoch_restores_the_loss_scaler_and_matches_bit_for_bit() {
    let _g = lock();
    let dev = Device::cpu();
    // Batch 3 of every epoch overflows f16 (skipped, the scale halved); the scale grows after
    // 4 good steps. At the stop (epoch 2, step 2) the scaler is at 32768 with 3 good steps
    // counted: a resume that forgot it would skip, grow and count differently.
    let trainer = |recorder: &Recorder| {
        let mut scaler = GradScaler::new();
        scaler.growth_interval = 4;
        sgd_trainer(small(&dev)).with_grad_scaler(scaler).with_callback(recorder.clone())
    };
    let config = |dir: &std::path::Path| {
        let mut c = quiet(4, Precision::F16);
        c.epochs = 3;
        c.log_interval = 1;
        c.seed = 7;
        c.checkpoint_dir = Some(dir.to_path_buf());
        c
    };
    let recorder = || Recorder { losses: Arc::default(), stop: None };
    let straight_dir = tempfile::tempdir().unwrap();
    let straight = recorder();
    let mut a = trainer(&straight);
    a.fit(&data(Some(2), 1e6, 8), None, &config(straight_dir.path())).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let first = Recorder { stop: Some((flag.clone(), 5)), ..recorder() };
    let mut c = config(dir.path());
    c.stop = Some(flag);
    let err = trainer(&first).fit(&data(Some(2), 1e6, 8), None, &c).unwrap_err();
    assert!(matches!(err, Error::Interrupted { epoch: 2, step: 2, saved: Some(_) }), "{err}");
    let (_, meta) = checkpoint::load_with_metadata(dir.path().join("last.safetensors"), &dev).unwrap();
    let saved: serde_json::Value = serde_json::from_str(&meta["liandan.train_state"]).unwrap();
    assert_eq!(saved["scaler"], serde_json::json!({ "scale": 32768.0, "growth_tracker": 3, "skipped": 1 }), "the scaler's state is in the checkpoint");

    let second = recorder();
    let mut b = trainer(&second);
    c = config(dir.path());
    c.resume = true;
    b.fit(&data(Some(2), 1e6, 8), None, &c).unwrap();
    let mut resumed = first.losses.lock().unwrap().clone();
    resumed.extend(second.losses.lock().unwrap().iter().copied());
    assert_eq!(resumed, *straight.losses.lock().unwrap(), "losses, bit for bit");
    let bits = |t: &Trainer<Sequential>| weights(t).iter().map(|w| w.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&b), bits(&a), "weights, bit for bit");
    let (sa, sb) = (a.grad_scaler().unwrap().state(), b.grad_scaler().unwrap().state());
    assert_eq!(sb, sa);
    assert_eq!(sa.skipped, 3, "one overflow per epoch");
}

#[test]
#[ignore = "slow: mnist_cnn trained three times, f16 and bf16 emulated on the CPU; cargo test -- --ignored"]
fn mnist_cnn_in_f16_and_bf16_reaches_the_f32_validation_accuracy_within_a_point() {
    let _g = lock();
    let dev = Device::cpu();
    // A subset and one epoch keep this cheap (CI runs it on 2 cores); every precision sees the
    // same initial weights, batches and dropout masks, so only the arithmetic differs.
    let (train, val) = bundled_mnist().unwrap();
    let train = DataLoader::new(Subset::new(Arc::new(train), (0..TRAIN).collect()).unwrap(), 64, &dev).unwrap().shuffle(1);
    let val = DataLoader::new(Subset::new(Arc::new(val), (0..VAL).collect()).unwrap(), 500, &dev).unwrap();
    let accuracy = |precision: Precision| {
        let model = seeded_zoo("mnist_cnn", 1, &dev);
        let opt = optim::for_zoo(model.spec(), model.named_parameters()).unwrap();
        let mut t = Trainer::with_boxed(model, Box::new(|out: &Tensor, y: &Tensor| Ok(out.nll_loss(y, Reduction::Mean)?)), opt).with_metric(Accuracy::new());
        let mut c = quiet(usize::MAX, precision);
        c.limit_batches = None;
        c.monitor = "val_acc".into();
        let h = t.fit(&train, Some(&val), &c).unwrap();
        h.last("val_acc").unwrap()
    };
    let reference = accuracy(Precision::F32);
    assert!(reference > 0.85, "f32 learns: validation accuracy {reference}");
    for precision in [Precision::F16, Precision::BF16] {
        let acc = accuracy(precision);
        eprintln!("{precision}: validation accuracy {acc}, f32 {reference}");
        assert!((acc - reference).abs() <= 0.01, "{precision}: validation accuracy {acc}, f32 {reference}");
    }
}

/// `GradScaler::backward` starts backward from the scale rather than multiplying the loss by
/// it: the same gradients, bit for bit, as `scale(loss).backward()`, once the scale lives on
/// the device (after a step), with no product of the loss and of its gradient.
#[test]
fn backward_from_the_scale_matches_backward_through_the_scaled_loss() {
    let _g = lock();
    for dev in common::devices() {
        let model = seeded_zoo("mlp", 4, &dev);
        let x = Tensor::rand(&[4, 1024], 0.0, 1.0, 6, DType::F32, &dev).unwrap();
        let y = Tensor::from_vec((0..4i64).collect::<Vec<_>>(), &[4], &dev).unwrap();
        let params = model.parameters();
        let mut opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.01, ..SgdConfig::default() }).unwrap();
        let mut scaler = GradScaler::with_scale(1024.0);
        let loss = || autocast(DType::F16, || model.loss(&x, Some(&y))).unwrap();
        scaler.backward(&loss()).unwrap();
        let flag = scaler.unscale_(&params).unwrap();
        scaler.step(&mut opt, &flag).unwrap();

        let mut grads = |seeded: bool| -> (Vec<Vec<f64>>, u64) {
            opt.zero_grad();
            let loss = loss();
            liandan_train::nn::profile::start().unwrap();
            {
                // The session records every thread's calls: this one's are under this layer.
                let _here = liandan_train::nn::profile::layer("scaled backward");
                if seeded {
                    scaler.backward(&loss).unwrap();
                } else {
                    scaler.scale(&loss).unwrap().backward().unwrap();
                }
            }
            let p = liandan_train::nn::profile::stop().unwrap();
            let muls = p.events().iter().filter(|e| e.layer.starts_with("scaled backward") && e.name == "mul").count() as u64;
            (params.iter().map(|p| p.grad().unwrap().to_vec_f64().unwrap()).collect(), muls)
        };
        let (seeded, seeded_muls) = grads(true);
        let (scaled, scaled_muls) = grads(false);
        assert_eq!(seeded, scaled, "gradients on {dev}");
        assert_eq!(scaled_muls, seeded_muls + 2, "the loss's product and its gradient's on {dev}");
    }
}
