//! Embedding liandan in a program of your own: define a model with `impl_module!`, train it a
//! few steps by hand (plain SGD), and save and reload a checkpoint. Runs on the first GPU wgpu
//! finds, or on the CPU when there is none.
//!
//! ```sh
//! cargo run --release -p liandan-nn --example embed_wgpu
//! ```
//!
//! Copied into a program of your own, it needs one dependency, `liandan-nn`: its default
//! feature `wgpu` links the GPU backend, which registers every adapter wgpu finds as a
//! `Device`; nothing names the backend. With `default-features = false` the program is built
//! for the CPU only, without compiling wgpu, and nothing in it changes.
//!
//! Errors: every fallible call here returns `liandan_nn::Result`. A program that also uses
//! liandan-train (optimizers, data, the trainer) returns `liandan_train::Result`, whose error
//! wraps this one (see liandan-train's `embed_train` example); `?` works both ways.

use liandan_nn::layers::{Linear, LinearConfig};
use liandan_nn::{impl_module, no_grad, DType, Device, Forward, ModuleExt, Reduction, Result, Tensor};

/// Two linear layers with a tanh between: fits `y = sin(3 x0) + x1^2` on [-1, 1]^2.
struct Regressor {
    fc1: Linear,
    fc2: Linear,
}

impl_module!(Regressor { fc1, fc2 });

impl Forward for Regressor {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.tanh()?)
    }
}

impl Regressor {
    fn new(device: &Device) -> Result<Regressor> {
        Ok(Regressor { fc1: LinearConfig::new(2, 32).init(device)?, fc2: LinearConfig::new(32, 1).init(device)? })
    }
}

/// One step of plain SGD: `p -= lr * grad`, outside the graph.
fn sgd_step(model: &Regressor, lr: f64) -> Result<()> {
    no_grad(|| {
        for p in model.parameters() {
            if let Some(g) = p.grad() {
                p.assign(&p.sub(&g.mul_scalar(lr)?)?)?;
            }
        }
        Ok::<(), liandan_nn::Error>(())
    })?;
    model.zero_grad();
    Ok(())
}

fn main() -> Result<()> {
    let device = Device::gpus().into_iter().next().unwrap_or_else(Device::cpu);
    println!("device: {device}");

    let x = Tensor::rand(&[256, 2], -1.0, 1.0, 0, DType::F32, &device)?;
    let y = x.narrow(1, 0, 1)?.mul_scalar(3.0)?.sin()?.add(&x.narrow(1, 1, 1)?.square()?)?;

    let model = Regressor::new(&device)?;
    let mut first = None;
    for step in 0..100 {
        let loss = model.forward(&x)?.mse_loss(&y, Reduction::Mean)?;
        loss.backward()?;
        sgd_step(&model, 0.2)?;
        if step % 20 == 0 || step == 99 {
            // Reading the loss back waits for the device: done every 20 steps, not every one.
            let value = loss.item_f64()?;
            first.get_or_insert(value);
            println!("step {step:3}  loss {value:.5}");
        }
    }

    let path = std::env::temp_dir().join(format!("liandan-embed-{}.safetensors", std::process::id()));
    model.save(&path)?;
    let mut restored = Regressor::new(&device)?;
    let report = restored.load(&path, true)?;
    std::fs::remove_file(&path).ok();
    let same = model.forward(&x)?.sub(&restored.forward(&x)?)?.abs()?.max_all()?.item_f64()?;
    println!("checkpoint: {} tensors reloaded, largest output difference {same}", report.loaded.len());
    assert_eq!(same, 0.0, "the reloaded model must compute exactly what the saved one did");
    Ok(())
}
