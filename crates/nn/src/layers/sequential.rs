//! `Sequential`: layers applied one after another (`torch.nn.Sequential`).

use liandan_tensor::Tensor;

use crate::error::Result;
use crate::impl_module;
use crate::module::{Forward, Layer};

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

impl_module!(Sequential { inner: layers });

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

impl Forward for Sequential {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for layer in &self.layers {
            x = layer.forward(&x)?;
        }
        Ok(x)
    }

    /// A container, not a layer: no summary row or profiler layer of its own, as torchsummary
    /// skips `nn.Sequential`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::summary::container(self, || self.forward_impl(x))
    }
}
