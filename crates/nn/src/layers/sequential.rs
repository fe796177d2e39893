//! `Sequential`: layers applied one after another (`torch.nn.Sequential`).

use liandan_tensor::Tensor;

use crate::error::Result;
use crate::module::{join, Forward, Layer, Module, TensorKind};

/// Layers applied in order, each to the previous one's output. Children are named by their
/// index, as PyTorch's: `0.weight`, `1.running_mean`, `4.bias`; layers without tensors (ReLU,
/// Flatten) still take an index.
///
/// ```
/// use liandan_nn::layers::{Conv2dConfig, Flatten, LinearConfig, ReLU, Sequential};
/// use liandan_nn::{Device, ModuleExt};
/// # fn main() -> liandan_nn::Result<()> {
/// let dev = Device::cpu();
/// let model = Sequential::new()
///     .push(Conv2dConfig::new(1, 4, 3).init(&dev)?)
///     .push(ReLU)
///     .push(Flatten::default())
///     .push(LinearConfig::new(4 * 26 * 26, 10).init(&dev)?);
/// assert_eq!(model.named_parameters()[2].0, "3.weight");
/// # Ok(())
/// # }
/// ```
///
/// # Shapes
/// - input: whatever the first layer takes
/// - output: whatever the last layer gives (the input itself when empty)
#[derive(Default)]
pub struct Sequential {
    pub layers: Vec<Box<dyn Layer>>,
}

impl Sequential {
    /// An empty sequence.
    pub fn new() -> Self {
        Sequential { layers: Vec::new() }
    }

    /// Appends `layer` (builder form of [`Sequential::add`]).
    pub fn push(mut self, layer: impl Layer + 'static) -> Self {
        self.layers.push(Box::new(layer));
        self
    }

    /// Appends `layer`.
    pub fn add(&mut self, layer: impl Layer + 'static) {
        self.layers.push(Box::new(layer));
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        for (i, layer) in self.layers.iter().enumerate() {
            layer.visit(&join(prefix, &i.to_string()), f);
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer.visit_mut(&join(prefix, &i.to_string()), f)?;
        }
        Ok(())
    }

    fn set_training(&mut self, training: bool) {
        for layer in &mut self.layers {
            layer.set_training(training);
        }
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for layer in &self.layers {
            x = layer.forward(&x)?;
        }
        Ok(x)
    }
}
