//! Proof that the optimizers train: the zoo `mlp` learns a separable problem with each of
//! them, and `mnist_cnn` steps with Adadelta + StepLR on the GPU without touching the CPU.

mod common;

use liandan_nn::{manual_seed, zoo, DType, Device, ModuleExt, Tensor};
use liandan_train::optim::{Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, Optimizer, RmsProp, RmsPropConfig, Sgd, SgdConfig};
use liandan_train::sched::{LrScheduler, StepLR};

/// Held while a test draws from the global generator: tests run on parallel threads, and
/// another's `manual_seed` would change this one's dropout masks.
static SEED: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Ten classes, `per_class` samples each: class `c` is its own random prototype in 1024
/// dimensions plus small noise, so a linear boundary separates them.
fn separable(per_class: usize, device: &Device) -> (Tensor, Tensor) {
    let n = 10 * per_class;
    let prototypes = Tensor::randn(&[10, 1024], 41, DType::F32, device).unwrap();
    let labels: Vec<i64> = (0..n as i64).map(|i| i % 10).collect();
    let y = Tensor::from_vec(labels, &[n], device).unwrap();
    let noise = Tensor::randn(&[n, 1024], 42, DType::F32, device).unwrap().mul_scalar(0.3).unwrap();
    let x = prototypes.index_select(0, &y).unwrap().add(&noise).unwrap();
    (x, y)
}

/// Trains a fresh zoo `mlp` on the CPU for `steps` full-batch steps; the losses before and after.
fn train_mlp(make: impl FnOnce(Vec<(String, Tensor)>) -> Box<dyn Optimizer>, steps: usize) -> (f64, f64) {
    let dev = Device::cpu();
    let _seed = SEED.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(0);
    let model = zoo::build("mlp", &dev).unwrap();
    let (x, y) = separable(4, &dev);
    let mut opt = make(model.named_parameters());
    let mut losses = Vec::new();
    for _ in 0..steps {
        opt.zero_grad();
        let loss = model.loss(&x, Some(&y)).unwrap();
        losses.push(loss.item_f64().unwrap());
        loss.backward().unwrap();
        opt.step().unwrap();
    }
    (losses[0], model.loss(&x, Some(&y)).unwrap().item_f64().unwrap())
}

/// Every optimizer takes the mlp from chance (ln 10 = 2.3) to below 0.05 in 15 steps.
#[test]
fn mlp_learns_a_separable_problem_with_every_optimizer() {
    type Make = Box<dyn Fn(Vec<(String, Tensor)>) -> Box<dyn Optimizer>>;
    let cases: Vec<(&str, Make)> = vec![
        ("SGD momentum", Box::new(|p| Box::new(Sgd::new(p, SgdConfig { lr: 0.05, momentum: 0.9, ..SgdConfig::default() }).unwrap()))),
        (
            "SGD nesterov",
            Box::new(|p| Box::new(Sgd::new(p, SgdConfig { lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 5e-4, ..SgdConfig::default() }).unwrap())),
        ),
        ("Adam", Box::new(|p| Box::new(Adam::new(p, AdamConfig::adam(1e-3)).unwrap()))),
        ("AdamW amsgrad", Box::new(|p| Box::new(Adam::new(p, AdamConfig { amsgrad: true, ..AdamConfig::adamw(1e-3) }).unwrap()))),
        ("Adadelta", Box::new(|p| Box::new(Adadelta::new(p, AdadeltaConfig::default()).unwrap()))),
        ("RMSprop centered", Box::new(|p| Box::new(RmsProp::new(p, RmsPropConfig { lr: 1e-3, centered: true, ..RmsPropConfig::default() }).unwrap()))),
        ("Adagrad", Box::new(|p| Box::new(Adagrad::new(p, AdagradConfig { lr: 0.05, ..AdagradConfig::default() }).unwrap()))),
    ];
    for (name, make) in cases {
        let (first, last) = train_mlp(make, 15);
        assert!(first > 2.0, "{name}: the untrained loss {first} should be near ln 10");
        assert!(last < 0.05, "{name}: loss {first} -> {last} after 15 steps, want < 0.05");
    }
}

/// `mnist_cnn` as PyTorch's MNIST example trains it (Adadelta lr 1.0, StepLR gamma 0.7),
/// a few steps on the GPU (a small batch: lavapipe takes seconds per step): the loss falls
/// and nothing ran on the CPU.
#[test]
fn mnist_cnn_steps_on_the_gpu_without_fallbacks() {
    let Some(gpu) = common::gpu() else { return };
    let _seed = SEED.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(0);
    let model = zoo::build("mnist_cnn", &gpu).unwrap();
    let x = Tensor::rand(&[4, 1, 28, 28], 0.0, 1.0, 5, DType::F32, &gpu).unwrap();
    let y = Tensor::from_vec((0..4i64).collect::<Vec<_>>(), &[4], &gpu).unwrap();
    let mut opt = Adadelta::new(model.named_parameters(), AdadeltaConfig { lr: 1.0, ..AdadeltaConfig::default() }).unwrap();
    let mut sched = StepLR::new(&mut opt, 1, 0.7).unwrap();
    let mut losses = Vec::new();
    for _ in 0..2 {
        opt.zero_grad();
        let loss = model.loss(&x, Some(&y)).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        sched.step(&mut opt, None).unwrap();
        losses.push(loss);
    }
    losses.push(model.loss(&x, Some(&y)).unwrap());
    let losses: Vec<f64> = losses.iter().map(|l| l.item_f64().unwrap()).collect();
    assert!(losses[2] < losses[0], "the loss should fall over 2 steps: {losses:?}");
    assert_eq!(sched.last_lr(), vec![1.0 * 0.7 * 0.7]);
    assert_eq!(opt.param_groups()[0].lr, 1.0 * 0.7 * 0.7);
    assert!(gpu.fallback_report().is_empty(), "ops fell back to the CPU: {:?}", gpu.fallback_report());
}

/// An optimizer built before the model moves still trains it: `to_dtype` and `to_device` move
/// the parameters in place (as PyTorch's `model.to(..)` keeps its Parameter objects), so the
/// optimizer's handles are still the model's.
#[test]
fn an_optimizer_built_before_a_move_still_trains() {
    let targets = std::iter::once((Device::cpu(), DType::F64)).chain(common::gpu().map(|g| (g, DType::F32)));
    for (device, dtype) in targets {
        let _seed = SEED.lock().unwrap_or_else(|e| e.into_inner());
        manual_seed(0);
        let mut model = zoo::build("mlp", &Device::cpu()).unwrap();
        let mut opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.05, momentum: 0.9, ..SgdConfig::default() }).unwrap();
        model.to_device(&device).unwrap();
        model.to_dtype(dtype).unwrap();
        let (x, y) = separable(4, &device);
        let x = x.to_dtype(dtype).unwrap();
        let mut losses = Vec::new();
        for _ in 0..8 {
            opt.zero_grad();
            let loss = model.loss(&x, Some(&y)).unwrap();
            losses.push(loss.item_f64().unwrap());
            loss.backward().unwrap();
            opt.step().unwrap();
        }
        assert!(losses[7] < 0.5 * losses[0], "{device} {dtype}: the loss should fall by half in 8 steps: {losses:?}");
    }
}
