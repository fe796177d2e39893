//! The layers: each a struct of parameter tensors plus a `XxxConfig` whose fields carry
//! PyTorch's defaults and whose `init(&device)` initializes the parameters as PyTorch's
//! `reset_parameters` does, seeded from [`liandan_tensor::rng::next_seed`] so that
//! [`liandan_tensor::manual_seed`] makes initialization reproducible.
//!
//! Each layer's `Module` is one [`impl_module!`](crate::impl_module) call beside its struct,
//! and its `Forward` is a `forward_impl`; summaries, profiles and anomaly reports name it
//! without anything more (see [`crate::module`]).
//!
//! Dimension letters: N batch, C channels, H height, W width, L length, D features.

mod activation;
mod attention;
mod conv;
mod embedding;
mod linear;
mod norm;
mod pool;
mod rnn;
mod sequential;
mod transformer;

pub use activation::{Dropout, Dropout2d, Flatten, LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh, GELU};
pub use attention::*;
pub use conv::{Conv1d, Conv1dConfig, Conv2d, Conv2dConfig, ConvTranspose2d, ConvTranspose2dConfig};
pub use embedding::{Embedding, EmbeddingConfig};
pub use linear::{Linear, LinearConfig};
pub use norm::{
    BatchNorm, BatchNorm1d, BatchNorm1dConfig, BatchNorm2d, BatchNorm2dConfig, BatchNormConfig, GroupNorm, GroupNormConfig, LayerNorm, LayerNormConfig,
};
pub use pool::{AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, MaxPool2d};
pub use rnn::*;
pub use sequential::Sequential;
pub use transformer::*;

use liandan_tensor::{DType, Device, Tensor};

use crate::error::Result;

/// A parameter: a leaf F32 tensor drawn from uniform(-bound, bound), requiring grad. This is
/// PyTorch's default for Linear and Conv: `kaiming_uniform_(a = sqrt(5))` gives
/// `gain * sqrt(3 / fan_in)` with `gain = sqrt(2 / (1 + 5))`, i.e. `1 / sqrt(fan_in)`, and
/// biases take the same bound.
fn uniform_param(shape: &[usize], bound: f64, device: &Device) -> Result<Tensor> {
    Ok(Tensor::rand(shape, -bound, bound, liandan_tensor::rng::next_seed(), DType::F32, device)?.requires_grad_(true)?)
}

/// A parameter filled with `value` (norm layers' weight 1 and bias 0).
fn full_param(shape: &[usize], value: f64, device: &Device) -> Result<Tensor> {
    Ok(Tensor::full(shape, value, DType::F32, device)?.requires_grad_(true)?)
}

/// `1 / sqrt(fan_in)`, the bound of PyTorch's default Linear/Conv init (0 for an empty fan-in,
/// where PyTorch skips the bias init and leaves zeros-sized tensors anyway).
fn default_bound(fan_in: usize) -> f64 {
    if fan_in == 0 {
        0.0
    } else {
        1.0 / (fan_in as f64).sqrt()
    }
}

/// Builder methods `with_<field>(value)` for a config's public fields (burn's style), so that
/// `Conv2dConfig::new(1, 32, 3).with_stride((2, 2))` reads like PyTorch's keyword arguments.
macro_rules! with_fields {
    ($ty:ty { $($method:ident : $field:ident : $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $method(mut self, $field: $t) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}
pub(crate) use with_fields;

/// A layer of one option, `$field: $ty`: the struct, `new($field)`, and a forward pass that is
/// the tensor op `$op` given that option.
macro_rules! one_option_layer {
    ($(#[$doc:meta])* $name:ident { $field:ident: $ty:ty } => $op:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            pub $field: $ty,
        }

        impl_module!($name {});

        impl $name {
            pub fn new($field: $ty) -> Self {
                $name { $field }
            }
        }

        impl Forward for $name {
            fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
                Ok(x.$op(self.$field)?)
            }
        }
    };
}
pub(crate) use one_option_layer;
