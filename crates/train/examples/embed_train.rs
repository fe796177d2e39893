//! Training from a program of your own: a zoo model sized for the bundled MNIST, AdamW and a
//! learning-rate schedule, in a loop written out by hand (`Trainer::fit` runs this loop for
//! you, with checkpoints, history and exact resume).
//!
//! ```sh
//! cargo run --release -p liandan-train --example embed_train
//! ```
//!
//! Copied into a program of your own, it needs two dependencies, `liandan-nn` and
//! `liandan-train` (or liandan-train alone, which re-exports liandan-nn as
//! `liandan_train::nn`). Their default features link the GPU backend, the downloads and the
//! plots; `default-features = false` on both builds a CPU-only program without them.
//!
//! Errors: `liandan_train::Error` wraps `liandan_nn::Error`, so `main` returns
//! `liandan_train::Result` and `?` takes the errors of both crates. A function that returns
//! `liandan_nn::Result` may call liandan-train as well (`accuracy` below): liandan-train turns
//! its errors into `liandan_nn::Error::Other`, and `downcast_ref::<liandan_train::Error>()` on
//! what that holds gives the original back.

use liandan_nn::{no_grad, zoo, DType, Device, ModuleExt};
use liandan_train::data::{bundled_mnist, DataLoader};
use liandan_train::optim::{AdamW, AdamWConfig, Optimizer};
use liandan_train::sched::{LrScheduler, StepLR};

fn main() -> liandan_train::Result<()> {
    let device = Device::best()?;
    println!("device: {device}");
    let (train, val) = bundled_mnist()?;
    let train = DataLoader::new(train, 64, &device)?.shuffle(1);
    let val = DataLoader::new(val, 1000, &device)?;
    // The zoo's mlp with as many inputs as an MNIST image has pixels (784).
    let model = zoo::build_for("mlp", &[1, 28, 28], &device)?;
    let mut optimizer = AdamW::new(model.named_parameters(), AdamWConfig::new(1e-3))?;
    let mut scheduler = StepLR::new(&mut optimizer, 1, 0.7)?;
    for epoch in 0..2 {
        for batch in train.iter(epoch)? {
            let batch = batch?;
            optimizer.zero_grad();
            model.loss(&batch.input, Some(&batch.target))?.backward()?;
            optimizer.step()?;
        }
        scheduler.step(&mut optimizer, None)?;
        println!("epoch {}: validation accuracy {:.4}", epoch + 1, accuracy(&*model, &val)?);
    }
    Ok(())
}

/// The share of `data` that `model` classifies right. It returns `liandan_nn::Result` and
/// still uses liandan-train's loader: `?` converts the loader's errors.
fn accuracy(model: &dyn zoo::ZooModel, data: &DataLoader) -> liandan_nn::Result<f64> {
    let (mut right, mut seen) = (0.0, 0usize);
    for batch in data.iter(0)? {
        let batch = batch?;
        let predicted = no_grad(|| model.forward(&batch.input))?.argmax(1usize, false)?;
        right += predicted.eq(&batch.target)?.to_dtype(DType::F32)?.sum_all()?.item_f64()?;
        seen += batch.target.shape()[0];
    }
    Ok(right / seen as f64)
}
