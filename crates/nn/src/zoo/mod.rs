//! The seed model zoo: the seven models PyTorch-on-Apple-GPU users train and benchmark, with
//! exactly the architectures, state-dict names and parameter counts of PyTorch's definitions
//! (`docs/MODEL_ZOO.md`), so that a checkpoint moves between the two unchanged and
//! timings compare one to one.
//!
//! | name | input (batch) | loss | optimizer | params |
//! |---|---|---|---|---|
//! | `mlp` | 1024x1024 | cross-entropy | SGD lr 0.01 | 658,698 |
//! | `mnist_cnn` | 64x1x28x28 | NLL (the model ends in LogSoftmax) | Adadelta lr 1.0, StepLR gamma 0.7 | 1,199,882 |
//! | `seed003_cnn` | 128x1x28x28 | cross-entropy | Adam lr 0.01 | 831,626 |
//! | `resnet18` | 128x3x32x32 | cross-entropy | SGD lr 0.1 momentum 0.9 wd 5e-4 | 11,173,962 |
//! | `vit` | 128x3x32x32 | cross-entropy | AdamW lr 1e-3 | 2,693,578 |
//! | `lstm` | 64x28x28 | cross-entropy | Adam lr 1e-3 | 295,434 |
//! | `vae` | 128x784 | BCE (sum) + KL | Adam lr 1e-3 | 652,824 |
//!
//! [`build`] makes the reference network; [`build_for`] makes it for the samples of a dataset,
//! which changes only `mlp`: its first layer takes as many inputs as a sample has values.
//! [`build_with`] sizes a classifier's head to a number of classes (the folders of an image
//! folder, the labels of a table).
//!
//! ```
//! use liandan_nn::{zoo, Device, ModuleExt};
//! # fn main() -> liandan_nn::Result<()> {
//! let model = zoo::build("mlp", &Device::cpu())?;
//! assert_eq!(model.num_parameters(), 658_698);
//! assert_eq!(model.spec().input_shape, &[1024, 1024]);
//! let for_mnist = zoo::build_for("mlp", &[1, 28, 28], &Device::cpu())?;
//! assert_eq!(for_mnist.sample_shape(), [784]);
//! assert!(zoo::build_for("vit", &[1, 28, 28], &Device::cpu()).is_err()); // vit takes [3, 32, 32]
//! # Ok(())
//! # }
//! ```

mod cnn;
mod dense;
mod sequence;

pub use cnn::{BasicBlock, MnistCnn, ResNet18, Seed003Cnn};
pub use dense::{Mlp, Vae, VaeOutput};
pub use sequence::{LstmNet, Vit};

use liandan_tensor::{Device, Tensor};

use crate::error::{Error, Result};
use crate::module::Layer;

/// How a zoo model is trained in the reference: the optimizer and its hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimizerSpec {
    Sgd { lr: f64, momentum: f64, weight_decay: f64 },
    Adadelta { lr: f64 },
    Adam { lr: f64 },
    AdamW { lr: f64 },
}

/// What the model learns from: class labels, or the input itself (the VAE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Integer labels `[N]` in `0..classes`.
    Classes(usize),
    /// The input is its own target.
    Reconstruction,
}

/// One zoo entry: the facts `docs/MODEL_ZOO.md` states about a model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZooSpec {
    pub name: &'static str,
    pub architecture: &'static str,
    /// The reference batch's shape, batch first.
    pub input_shape: &'static [usize],
    pub target: Target,
    pub loss: &'static str,
    pub optimizer: OptimizerSpec,
    /// `StepLR` decay per epoch, where the reference uses one.
    pub step_lr_gamma: Option<f64>,
    /// Parameter elements, as `sum(p.numel() for p in model.parameters())` in PyTorch.
    pub params: usize,
}

/// A zoo model: a [`Layer`] that also knows its spec and its training loss.
pub trait ZooModel: Layer {
    fn spec(&self) -> &'static ZooSpec;

    /// The loss the reference trains with, on a batch `x` with labels `y` (`None` for
    /// [`Target::Reconstruction`]; labels are I64 class indices).
    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor>;

    /// The shape of one sample this model takes (the batch dimension left out): the spec's,
    /// except for an `mlp` built for other data ([`build_for`]).
    fn sample_shape(&self) -> Vec<usize> {
        self.spec().input_shape[1..].to_vec()
    }
}

/// Every model of the zoo, in `docs/MODEL_ZOO.md`'s order.
pub const SPECS: &[ZooSpec] = &[
    ZooSpec {
        name: "mlp",
        architecture: "Linear 1024-512, ReLU, Linear 512-256, ReLU, Linear 256-10",
        input_shape: &[1024, 1024],
        target: Target::Classes(10),
        loss: "cross-entropy",
        optimizer: OptimizerSpec::Sgd { lr: 0.01, momentum: 0.0, weight_decay: 0.0 },
        step_lr_gamma: None,
        params: 658_698,
    },
    ZooSpec {
        name: "mnist_cnn",
        architecture: "Conv 1-32 k3, ReLU, Conv 32-64 k3, ReLU, MaxPool 2, Dropout .25, Flatten, Linear 9216-128, ReLU, Dropout .5, Linear 128-10, LogSoftmax",
        input_shape: &[64, 1, 28, 28],
        target: Target::Classes(10),
        loss: "NLL",
        optimizer: OptimizerSpec::Adadelta { lr: 1.0 },
        step_lr_gamma: Some(0.7),
        params: 1_199_882,
    },
    ZooSpec {
        name: "seed003_cnn",
        architecture: "Conv 1-64 k3, MaxPool 2, Conv 64-512 k3, MaxPool 2, Dropout2d .1, AdaptiveMaxPool (1,1), Flatten, Linear 512-1024, ReLU, Linear 1024-10",
        input_shape: &[128, 1, 28, 28],
        target: Target::Classes(10),
        loss: "cross-entropy",
        optimizer: OptimizerSpec::Adam { lr: 0.01 },
        step_lr_gamma: None,
        params: 831_626,
    },
    ZooSpec {
        name: "resnet18",
        architecture: "CIFAR ResNet-18: 3x3 stem (64, no max-pool), BasicBlocks [2,2,2,2] at 64/128/256/512 with BatchNorm, 1x1 conv shortcut on downsample, global avg-pool, Linear 512-10",
        input_shape: &[128, 3, 32, 32],
        target: Target::Classes(10),
        loss: "cross-entropy",
        optimizer: OptimizerSpec::Sgd { lr: 0.1, momentum: 0.9, weight_decay: 5e-4 },
        step_lr_gamma: None,
        params: 11_173_962,
    },
    ZooSpec {
        name: "vit",
        architecture: "patch 4 conv embed, dim 192, cls token + learned pos (65 tokens), 6 pre-norm encoder layers (3 heads, MLP 768, GELU), LayerNorm, Linear 192-10",
        input_shape: &[128, 3, 32, 32],
        target: Target::Classes(10),
        loss: "cross-entropy",
        optimizer: OptimizerSpec::AdamW { lr: 1e-3 },
        step_lr_gamma: None,
        params: 2_693_578,
    },
    ZooSpec {
        name: "lstm",
        architecture: "LSTM input 28, hidden 256, one layer, batch-first, over the 28 rows of an MNIST image; Linear 256-10 on the last step",
        input_shape: &[64, 28, 28],
        target: Target::Classes(10),
        loss: "cross-entropy",
        optimizer: OptimizerSpec::Adam { lr: 1e-3 },
        step_lr_gamma: None,
        params: 295_434,
    },
    ZooSpec {
        name: "vae",
        architecture: "pytorch/examples VAE: 784-400, then 400-20 twice (mu, logvar), reparameterize, 20-400-784, sigmoid",
        input_shape: &[128, 784],
        target: Target::Reconstruction,
        loss: "BCE (sum) + KL",
        optimizer: OptimizerSpec::Adam { lr: 1e-3 },
        step_lr_gamma: None,
        params: 652_824,
    },
];

/// The names of the zoo's models.
pub fn names() -> Vec<&'static str> {
    SPECS.iter().map(|s| s.name).collect()
}

/// The spec of the model called `name`.
pub fn spec(name: &str) -> Result<&'static ZooSpec> {
    SPECS.iter().find(|s| s.name == name).ok_or_else(|| Error::UnknownModel { name: name.to_string(), known: names().join(", ") })
}

/// The model called `name`, freshly initialized on `device` as PyTorch initializes it (seeded
/// from [`liandan_tensor::manual_seed`]), in training mode.
pub fn build(name: &str, device: &Device) -> Result<Box<dyn ZooModel>> {
    let spec = spec(name)?;
    Ok(match spec.name {
        "mlp" => Box::new(Mlp::new(device)?),
        "mnist_cnn" => Box::new(MnistCnn::new(device)?),
        "seed003_cnn" => Box::new(Seed003Cnn::new(device)?),
        "resnet18" => Box::new(ResNet18::new(10, device)?),
        "vit" => Box::new(Vit::new(device)?),
        "lstm" => Box::new(LstmNet::new(device)?),
        "vae" => Box::new(Vae::new(device)?),
        other => unreachable!("SPECS lists `{other}` but build() does not"),
    })
}

/// The model called `name` for samples of `sample_shape` (the batch dimension left out),
/// freshly initialized as [`build`] does. `mlp` takes as many inputs as a sample has values
/// (784 for MNIST, 3,072 for CIFAR-10); every other model takes its own sample shape, or one
/// with as many values that it reshapes (the `lstm` reads `[1, 28, 28]` as 28 rows of 28), and
/// anything else is an [`Error::InputShape`].
pub fn build_for(name: &str, sample_shape: &[usize], device: &Device) -> Result<Box<dyn ZooModel>> {
    let spec = spec(name)?;
    let values: usize = sample_shape.iter().product();
    if spec.name == "mlp" && values > 0 {
        return Ok(Box::new(Mlp::with_inputs(values, device)?));
    }
    let own = &spec.input_shape[1..];
    if own.iter().product::<usize>() != values {
        return Err(Error::InputShape { model: spec.name.to_string(), expected: own.to_vec(), found: sample_shape.to_vec() });
    }
    build(name, device)
}

/// How [`build_with`] sizes a classifier for data other than its reference's: the classes its
/// head predicts and, for the `mlp`, the features of its input (a table's columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZooConfig {
    pub classes: usize,
    /// The `mlp`'s input width; `None` keeps the reference's (1024). Models of images take
    /// none.
    pub in_features: Option<usize>,
}

impl ZooConfig {
    /// A head of `classes` outputs on the reference's input.
    pub fn classes(classes: usize) -> ZooConfig {
        ZooConfig { classes, in_features: None }
    }
}

/// Classifier `name` with a head of `config.classes` outputs (and the `mlp` with
/// `config.in_features` inputs), initialized as [`build`] does. Its state-dict keys are the
/// reference's; only the sizes of the first and last layers change (the model's
/// [`ZooModel::spec`] still describes the reference).
///
/// ```
/// use liandan_nn::zoo::{self, ZooConfig};
/// use liandan_nn::{DType, Device, Forward, Tensor};
/// # fn main() -> liandan_nn::Result<()> {
/// let dev = Device::cpu();
/// let model = zoo::build_with("mlp", &ZooConfig { classes: 3, in_features: Some(4) }, &dev)?;
/// let out = model.forward(&Tensor::zeros(&[2, 4], DType::F32, &dev)?)?;
/// assert_eq!(out.shape(), &[2, 3]);
/// # Ok(())
/// # }
/// ```
pub fn build_with(name: &str, config: &ZooConfig, device: &Device) -> Result<Box<dyn ZooModel>> {
    let spec = spec(name)?;
    let bad = |detail: String| Error::ZooConfig { model: spec.name.to_string(), detail };
    if spec.target == Target::Reconstruction {
        return Err(bad("the model reconstructs its input and has no classes to size".into()));
    }
    if config.classes == 0 {
        return Err(bad("a classifier needs at least one class".into()));
    }
    if config.in_features == Some(0) {
        return Err(bad("an input needs at least one feature".into()));
    }
    let classes = config.classes;
    Ok(match (spec.name, config.in_features) {
        ("mlp", features) => Box::new(Mlp::with_sizes(features.unwrap_or(Mlp::INPUTS), classes, device)?),
        (_, Some(n)) => {
            return Err(bad(format!("its input is an image of shape {:?}, so it takes no input width (asked for {n} features)", &spec.input_shape[1..])))
        }
        ("mnist_cnn", None) => Box::new(MnistCnn::with_classes(classes, device)?),
        ("seed003_cnn", None) => Box::new(Seed003Cnn::with_classes(classes, device)?),
        ("resnet18", None) => Box::new(ResNet18::new(classes, device)?),
        ("vit", None) => Box::new(Vit::with_classes(classes, device)?),
        ("lstm", None) => Box::new(LstmNet::with_classes(classes, device)?),
        (other, None) => unreachable!("SPECS lists classifier `{other}` but build_with() does not"),
    })
}

/// `SPECS` entry `name`, for the models' own `spec()`.
fn spec_of(name: &str) -> &'static ZooSpec {
    spec(name).expect("every zoo model is listed in SPECS")
}

/// Cross-entropy on class labels, the loss of most of the zoo.
fn class_loss(logits: Tensor, y: Option<&Tensor>, model: &str) -> Result<Tensor> {
    let y = y.ok_or_else(|| missing_labels(model))?;
    Ok(logits.cross_entropy(y, liandan_tensor::Reduction::Mean)?)
}

fn missing_labels(model: &str) -> Error {
    Error::MissingTargets { model: model.to_string(), what: "class labels" }
}
