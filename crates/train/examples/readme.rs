//! The README's library example: a model of your own, trained with the `Trainer` on the
//! bundled MNIST. `cargo run --release -p liandan-train --example readme`

use liandan_train::data::{bundled_mnist, DataLoader};
use liandan_train::nn::layers::{Linear, LinearConfig};
use liandan_train::nn::{impl_module, Device, Forward, ModuleExt, Reduction, Result as NnResult, Tensor};
use liandan_train::optim::{Adam, AdamConfig};
use liandan_train::trainer::{Accuracy, FitConfig, Mode, Trainer};

struct Net {
    fc1: Linear,
    fc2: Linear,
}

impl_module!(Net { fc1, fc2 }); // parameters `fc1.weight`, `fc1.bias`, ... as PyTorch names them

impl Forward for Net {
    fn forward_impl(&self, x: &Tensor) -> NnResult<Tensor> {
        let h = self.fc1.forward(&x.flatten(1, -1)?)?.relu()?; // [N, 1, 28, 28] -> [N, 128]
        self.fc2.forward(&h)
    }
}

fn main() -> liandan_train::Result<()> {
    let device = Device::best()?; // LIANDAN_DEVICE, else a GPU, else the CPU
    let (train, val) = bundled_mnist()?; // 8,000 + 2,000 real MNIST images, built in
    let train = DataLoader::new(train, 64, &device)?.shuffle(1);
    let val = DataLoader::new(val, 1000, &device)?;
    let net = Net { fc1: LinearConfig::new(784, 128).init(&device)?, fc2: LinearConfig::new(128, 10).init(&device)? };
    let optimizer = Adam::new(net.named_parameters(), AdamConfig::adam(1e-3))?;
    let loss = |out: &Tensor, y: &Tensor| Ok(out.cross_entropy(y, Reduction::Mean)?);
    let mut trainer = Trainer::new(net, loss, optimizer).with_metric(Accuracy::new());
    let history = trainer.fit(&train, Some(&val), &FitConfig::new(3))?;
    let (epoch, acc) = history.best("val_acc", Mode::Max).unwrap_or_default();
    println!("best val_acc {acc:.4} at epoch {epoch}");
    Ok(())
}
