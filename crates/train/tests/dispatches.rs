//! What an optimizer step and a training pass cost in kernel launches, counted by a backend that wraps the CPU
//! and counts every kernel-trait call. Each call is at least one dispatch on the wgpu
//! backend (which batches them into one submission), so these are the GPU's launch counts.
//! A fused kernel counts one launch, as it is one dispatch on the wgpu backend.
//! `cargo test -p liandan-train --test dispatches -- --nocapture` prints them.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use liandan_nn::backend::{BinaryOp, CmpOp, ReduceOp, UnaryOp, Window2d};
use liandan_nn::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBias, Conv2dBiasRelu, MatmulBias, Relu, ReluBackward};
use liandan_nn::{
    manual_seed, no_fusion, zoo, Backend, CustomKernel, DType, Device, DeviceKind, Distribution, ModuleExt, Storage, Strided, Tensor, TensorResult as Result,
};
use liandan_train::optim::{Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, Optimizer, RmsProp, RmsPropConfig, Sgd, SgdConfig};

/// Kernel-trait calls that the fused batch norm saves in [`launches_of_a_resnet18_training_pass`]
/// (measured: 247 fused against 1307 composite; the fused count holds 40 batch-norm calls, 80
/// dispatches on the wgpu backend), with the ReLUs that run inside the blocks' first batch norms
/// (8 ReLUs, each two calls forward and two backward here, where this counting device declines
/// the fused ReLU), the blocks' residual adds with their ReLUs (8 `add_relu`s, one call
/// forward where the add and the ReLU take three), and the batch counts the forward kernels
/// keep (20 adds, and the scalar the first of them made). The difference is pinned rather than
/// both counts, so that a change to the other ops (the same either way on this backend) does
/// not move it.
const BATCH_NORM_SAVES: u64 = 1060;

/// The CPU backend, counting kernel launches (host copies are not launches).
#[derive(Debug)]
struct Counting {
    inner: Device,
    launches: AtomicU64,
}

impl Counting {
    fn hit(&self) -> &dyn Backend {
        self.launches.fetch_add(1, Ordering::Relaxed);
        self.inner.backend()
    }
}

impl Backend for Counting {
    fn name(&self) -> String {
        "counting cpu".into()
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::SoftwareGpu
    }
    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
        self.inner.backend().from_host(bytes, dtype)
    }
    fn to_host(&self, src: Strided) -> Result<Vec<u8>> {
        self.inner.backend().to_host(src)
    }
    fn full(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        self.hit().full(numel, value, dtype)
    }
    fn random(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        self.hit().random(dist, numel, seed, dtype)
    }
    fn copy(&self, src: Strided) -> Result<Storage> {
        self.hit().copy(src)
    }
    fn cast(&self, src: Strided, to: DType) -> Result<Storage> {
        self.hit().cast(src, to)
    }
    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        self.hit().unary(op, x)
    }
    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.hit().binary(op, lhs, rhs)
    }
    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.hit().compare(op, lhs, rhs)
    }
    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        self.hit().select(cond, on_true, on_false)
    }
    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        self.hit().reduce(op, x)
    }
    fn matmul(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.hit().matmul(lhs, rhs)
    }
    fn im2col(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage> {
        self.hit().im2col(x, window, pad_value)
    }
    fn col2im(&self, cols: Strided, window: Window2d) -> Result<Storage> {
        self.hit().col2im(cols, window)
    }
    fn max_pool2d(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)> {
        self.hit().max_pool2d(x, window)
    }
    fn avg_pool2d(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.hit().avg_pool2d(x, window, count_include_pad)
    }
    fn avg_pool2d_backward(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.hit().avg_pool2d_backward(dy, window, count_include_pad)
    }
    fn gather(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.hit().gather(src, index, dim)
    }
    fn scatter_add(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage> {
        self.hit().scatter_add(dst, index, src, dim)
    }
    fn index_select(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.hit().index_select(src, index, dim)
    }
    fn concat(&self, parts: &[Strided], dim: usize) -> Result<Storage> {
        self.hit().concat(parts, dim)
    }
    fn custom(&self, op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        // The CPU backend fuses the convolution, ReLU and a linear layer's bias too;
        // declining them here keeps the fused and composite passes apart by batch norm's
        // launches alone, which is what this counts.
        let declined = [
            op.downcast_ref::<Conv2d>().is_some(),
            op.downcast_ref::<Conv2dBias>().is_some(),
            op.downcast_ref::<Conv2dBiasRelu>().is_some(),
            op.downcast_ref::<Conv2dBackwardInput>().is_some(),
            op.downcast_ref::<Conv2dBackwardWeight>().is_some(),
            op.downcast_ref::<Relu>().is_some(),
            op.downcast_ref::<ReluBackward>().is_some(),
            op.downcast_ref::<MatmulBias>().is_some(),
        ];
        if declined.contains(&true) {
            return None;
        }
        let out = self.inner.backend().custom(op, inputs)?;
        self.launches.fetch_add(1, Ordering::Relaxed);
        Some(out)
    }
}

/// The counting device, wrapping the CPU.
fn counting_device() -> (Arc<Counting>, Device) {
    let counting = Arc::new(Counting { inner: Device::cpu(), launches: AtomicU64::new(0) });
    let dev = Device::from_backend(counting.clone());
    (counting, dev)
}

/// Launches of one resnet18 forward and backward at batch 2, in training mode (every batch
/// norm takes the batch's statistics and updates its running ones).
fn launches_per_training_pass() -> u64 {
    let (counting, dev) = counting_device();
    manual_seed(0);
    let model = zoo::build("resnet18", &dev).unwrap();
    let x = Tensor::rand(&[2, 3, 32, 32], -1.0, 1.0, 5, DType::F32, &dev).unwrap();
    let y = Tensor::from_vec(vec![1i64, 7], &[2], &dev).unwrap();
    let before = counting.launches.load(Ordering::Relaxed);
    model.loss(&x, Some(&y)).unwrap().backward().unwrap();
    counting.launches.load(Ordering::Relaxed) - before
}

/// Batch norm in training is one fused call forward (`ops::BatchNormTrain`) and one
/// backward (`ops::BatchNormBackward`), each two dispatches on the wgpu backend, where
/// the composite takes some twenty launches: resnet18 has 20 batch norms.
#[test]
fn launches_of_a_resnet18_training_pass() {
    let fused = launches_per_training_pass();
    let composite = no_fusion(launches_per_training_pass);
    println!("resnet18 forward + backward, batch 2: {fused} kernel-trait calls fused, {composite} composite");
    assert!(fused < composite, "fusion must save launches: {fused} fused against {composite} composite");
    assert_eq!(composite - fused, BATCH_NORM_SAVES, "{fused} fused against {composite} composite");
}

/// Launches of the second step (the first also creates the state) over resnet18's parameters.
fn launches_per_step(make: impl FnOnce(Vec<(String, liandan_nn::Tensor)>) -> Box<dyn Optimizer>) -> (usize, u64) {
    let (counting, dev) = counting_device();
    manual_seed(0);
    let model = zoo::build("resnet18", &dev).unwrap();
    let params = model.named_parameters();
    let mut opt = make(params.clone());
    for (_, p) in &params {
        p.set_grad(Some(p.ones_like().unwrap()));
    }
    opt.step().unwrap();
    let before = counting.launches.load(Ordering::Relaxed);
    opt.step().unwrap();
    (params.len(), counting.launches.load(Ordering::Relaxed) - before)
}

fn adam(p: Vec<(String, liandan_nn::Tensor)>) -> Box<dyn Optimizer> {
    Box::new(Adam::new(p, AdamConfig::adam(1e-3)).unwrap())
}

fn sgd(p: Vec<(String, liandan_nn::Tensor)>) -> Box<dyn Optimizer> {
    Box::new(Sgd::new(p, SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 5e-4, ..SgdConfig::default() }).unwrap())
}

fn rmsprop(p: Vec<(String, liandan_nn::Tensor)>) -> Box<dyn Optimizer> {
    Box::new(RmsProp::new(p, RmsPropConfig { momentum: 0.9, centered: true, weight_decay: 1e-4, ..RmsPropConfig::default() }).unwrap())
}

fn adagrad(p: Vec<(String, liandan_nn::Tensor)>) -> Box<dyn Optimizer> {
    Box::new(Adagrad::new(p, AdagradConfig { lr_decay: 0.01, weight_decay: 1e-4, ..AdagradConfig::default() }).unwrap())
}

fn adadelta(p: Vec<(String, liandan_nn::Tensor)>) -> Box<dyn Optimizer> {
    Box::new(Adadelta::new(p, AdadeltaConfig { weight_decay: 1e-4, ..AdadeltaConfig::default() }).unwrap())
}

/// The other fused updates (`rmsprop_step`, `adagrad_step`, `adadelta_step`), with every option that adds state or arithmetic: one launch per
/// parameter tensor too.
#[test]
fn launches_of_fused_rmsprop_adagrad_adadelta_steps() {
    let (n, rms) = launches_per_step(rmsprop);
    let (_, ada) = launches_per_step(adagrad);
    let (_, delta) = launches_per_step(adadelta);
    println!("resnet18 ({n} parameter tensors), fused: RMSprop {rms}, Adagrad {ada}, Adadelta {delta} launches per step");
    assert_eq!(n, 62);
    assert_eq!([rms, ada, delta], [n as u64; 3]);
}

/// A fused update (`adam_step`, `sgd_step`) is one launch per parameter
/// tensor, whatever the options, with nothing else in the step.
#[test]
fn launches_of_a_fused_resnet18_step() {
    let (n, adam) = launches_per_step(adam);
    let (_, sgd) = launches_per_step(sgd);
    println!("resnet18 ({n} parameter tensors), fused: Adam step {adam} launches, SGD momentum + weight decay step {sgd} launches");
    assert_eq!(n, 62);
    assert_eq!(adam, n as u64);
    assert_eq!(sgd, n as u64);
}

/// The composite updates (`LIANDAN_FUSION=0`) cost a fixed number of launches per parameter
/// tensor, counted here so that a change that adds launches shows.
#[test]
fn launches_of_a_composite_resnet18_step() {
    let (n, adam) = no_fusion(|| launches_per_step(adam));
    let (_, sgd) = no_fusion(|| launches_per_step(sgd));
    println!("resnet18 ({n} parameter tensors), composite: Adam step {adam} launches, SGD momentum + weight decay step {sgd} launches");
    assert_eq!(n, 62);
    // Adam: lerp 3, second moment 4, denominator 3, update 3; plus the step's two new scalars.
    assert_eq!(adam, 13 * n as u64 + 2);
    // SGD: weight decay 2, momentum 2, update 2; plus the momentum scalar, first used in the
    // second step (the first starts the buffer at the gradient).
    assert_eq!(sgd, 6 * n as u64 + 1);
}

/// On the wgpu backend a step runs each parameter group's updates as multi-tensor kernels
/// (`optim/fused/gpu.rs`) that write over the parameters and their state: one dispatch per chunk of tensors, 9 SGD (momentum) or 7 Adam updates a chunk where
/// a shader may bind 29 storage buffers (lavapipe, Metal), 24 where it may bind more (an
/// H200), instead of one dispatch per tensor; the step hands the backend 24 tensors a call.
/// Counted as dispatches recorded, over resnet18's 62 parameter tensors, in the second step
/// (the first also creates the state).
#[test]
fn dispatches_of_a_wgpu_resnet18_step() {
    let Some(device) = common::gpu() else { return };
    manual_seed(0);
    let model = zoo::build("resnet18", &device).unwrap();
    let params = model.named_parameters();
    for (_, p) in &params {
        p.set_grad(Some(p.ones_like().unwrap()));
    }
    for (name, make, narrow) in [("SGD", sgd as fn(_) -> _, 9), ("Adam", adam, 7)] {
        let mut opt = make(params.clone());
        opt.step().unwrap();
        let before = liandan_backend_wgpu::testing::dispatches_recorded();
        opt.step().unwrap();
        let dispatches = liandan_backend_wgpu::testing::dispatches_recorded() - before;
        println!("resnet18 ({} parameter tensors) on {device}: {name} step {dispatches} dispatches", params.len());
        assert_eq!(params.len(), 62);
        let calls = [24usize, 24, 14];
        let chunked = |width: usize| calls.iter().map(|c| c.div_ceil(width)).sum::<usize>();
        assert!([chunked(narrow), chunked(24)].contains(&(dispatches as usize)), "{name}: {dispatches} dispatches");
    }
}

/// The loss scaler checks resnet18's 62 gradients joined into one flat tensor: a fixed handful
/// of launches (the join, and the check's product and sum; the f32 gradients need no cast),
/// where four per tensor were some 250. The division is one launch per gradient on a backend
/// without multi-tensor kernels (this one counts the CPU's), each gradient staying a buffer of
/// its own for the optimizer's multi-tensor kernels. Each gradient comes back divided.
#[test]
fn launches_of_the_loss_scalers_unscale_and_check() {
    let (counting, dev) = counting_device();
    manual_seed(0);
    let model = zoo::build("resnet18", &dev).unwrap();
    let params = model.parameters();
    for (k, p) in params.iter().enumerate() {
        p.set_grad(Some(p.ones_like().unwrap().mul_scalar(k as f64).unwrap()));
    }
    let mut scaler = liandan_train::amp::GradScaler::with_scale(4.0);
    let before = counting.launches.load(Ordering::Relaxed);
    let flag = scaler.unscale_(&params).unwrap();
    let unscale = counting.launches.load(Ordering::Relaxed) - before;
    let before = counting.launches.load(Ordering::Relaxed);
    liandan_train::amp::nonfinite_flag(&params).unwrap().unwrap();
    let check = counting.launches.load(Ordering::Relaxed) - before;
    println!("resnet18 ({} parameter tensors): unscale and check {unscale} launches, check alone {check}", params.len());
    assert_eq!(flag.item_f64().unwrap(), 0.0);
    assert_eq!(params.len(), 62);
    assert_eq!((unscale, check), (62 + 3, 3));
    for (k, p) in params.iter().enumerate() {
        let g = p.grad().unwrap().to_vec_f64().unwrap();
        assert!(g.iter().all(|&v| v == k as f64 / 4.0), "gradient {k} divided by the scale");
    }
}

/// On the wgpu backend the loss scaler divides and checks resnet18's 62 gradients in one
/// multi-tensor kernel, 24 a dispatch (3 dispatches, where a multiply per gradient was 62 and
/// the check joined 3 more); each gradient comes back divided, still a buffer of its own.
#[test]
fn dispatches_of_the_loss_scalers_unscale_on_wgpu() {
    let Some(device) = common::gpu() else { return };
    manual_seed(0);
    let model = zoo::build("resnet18", &device).unwrap();
    let params = model.parameters();
    for (k, p) in params.iter().enumerate() {
        p.set_grad(Some(p.ones_like().unwrap().mul_scalar(k as f64).unwrap()));
    }
    let before = liandan_backend_wgpu::testing::dispatches_recorded();
    let flag = liandan_train::amp::GradScaler::with_scale(4.0).unscale_(&params).unwrap();
    let dispatches = liandan_backend_wgpu::testing::dispatches_recorded() - before;
    println!("resnet18 ({} parameter tensors) on {device}: unscale and check {dispatches} dispatches", params.len());
    assert_eq!(flag.item_f64().unwrap(), 0.0);
    assert_eq!(params.len(), 62);
    assert_eq!(dispatches, 62u64.div_ceil(24));
    for (k, p) in params.iter().enumerate() {
        let g = p.grad().unwrap();
        assert_eq!(g.layout().offset(), 0, "gradient {k} stays a buffer of its own");
        assert!(g.to_vec_f64().unwrap().iter().all(|&v| v == k as f64 / 4.0), "gradient {k} divided by the scale");
    }
}

/// On the wgpu backend, a step after the loss scaler's unscale and check runs the same
/// multi-tensor kernels (the same dispatches) and gives the same parameters as a step on
/// gradients that never were scaled.
#[test]
fn a_wgpu_step_after_the_loss_scalers_unscale_matches_one_on_unscaled_gradients() {
    let Some(device) = common::gpu() else { return };
    let init = zoo::build("mnist_cnn", &device).unwrap().parameters();
    let step = |joined: bool| -> (Vec<Vec<f64>>, u64) {
        // Both runs from the same parameters, whatever other tests do with the global seed.
        let model = zoo::build("mnist_cnn", &device).unwrap();
        let params = model.named_parameters();
        for ((_, p), v) in params.iter().zip(&init) {
            p.assign(v).unwrap();
        }
        for (k, (_, p)) in params.iter().enumerate() {
            let g = Tensor::rand(p.shape(), -1.0, 1.0, 40 + k as u64, DType::F32, &device).unwrap();
            p.set_grad(Some(if joined { g.mul_scalar(8.0).unwrap() } else { g }));
        }
        if joined {
            let ps: Vec<Tensor> = params.iter().map(|(_, p)| p.clone()).collect();
            assert_eq!(liandan_train::amp::GradScaler::with_scale(8.0).unscale_(&ps).unwrap().item_f64().unwrap(), 0.0);
        }
        let mut opt = adam(params.clone());
        opt.step().unwrap();
        let before = liandan_backend_wgpu::testing::dispatches_recorded();
        opt.step().unwrap();
        let dispatches = liandan_backend_wgpu::testing::dispatches_recorded() - before;
        (params.iter().map(|(_, p)| p.to_vec_f64().unwrap()).collect::<Vec<_>>(), dispatches)
    };
    let ((plain, plain_dispatches), (unscaled, unscaled_dispatches)) = (step(false), step(true));
    assert_eq!(unscaled_dispatches, plain_dispatches, "the step's dispatches after unscale_ against those on plain gradients");
    for (k, (a, b)) in unscaled.iter().zip(&plain).enumerate() {
        assert_eq!(a, b, "parameter {k}: a step on unscaled gradients against one on plain ones");
    }
}
