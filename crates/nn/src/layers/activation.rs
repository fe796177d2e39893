//! Layers without parameters: activations, `Softmax`/`LogSoftmax`, `Flatten`, and the two
//! dropouts (which only have a train/eval mode).

use liandan_tensor::Tensor;

use super::one_option_layer;
use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// An elementwise activation: a unit struct calling one tensor op.
macro_rules! activation {
    ($(#[$doc:meta] $name:ident => $op:ident),* $(,)?) => {
        $(
            #[$doc]
            ///
            /// # Shapes
            /// - input: any shape `[*]`
            /// - output: the input's shape
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name;

            impl_module!($name {});

            impl Forward for $name {
                fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
                    Ok(x.$op()?)
                }
            }
        )*
    };
}

activation! {
    /// `max(x, 0)` (`torch.nn.ReLU`).
    ReLU => relu,
    /// Exact GELU, `x Φ(x)` (`torch.nn.GELU()`, `approximate='none'`).
    GELU => gelu,
    /// `x σ(x)` (`torch.nn.SiLU`).
    SiLU => silu,
    /// `1 / (1 + e^-x)` (`torch.nn.Sigmoid`).
    Sigmoid => sigmoid,
    /// `tanh(x)` (`torch.nn.Tanh`).
    Tanh => tanh,
}

one_option_layer!(
    /// `x` where positive, `negative_slope x` elsewhere (`torch.nn.LeakyReLU(negative_slope=0.01)`).
    ///
    /// # Shapes
    /// - input: any shape `[*]`
    /// - output: the input's shape
    LeakyReLU { negative_slope: f64 } => leaky_relu
);

impl Default for LeakyReLU {
    fn default() -> Self {
        LeakyReLU { negative_slope: 0.01 }
    }
}

one_option_layer!(
    /// Softmax along `dim` (negative counts from the end), `torch.nn.Softmax(dim)`.
    ///
    /// # Shapes
    /// - input: any shape `[*]`
    /// - output: the input's shape, summing to 1 along `dim`
    Softmax { dim: isize } => softmax
);

one_option_layer!(
    /// Log of the softmax along `dim`, computed stably (`torch.nn.LogSoftmax(dim)`).
    ///
    /// # Shapes
    /// - input: any shape `[*]`
    /// - output: the input's shape
    LogSoftmax { dim: isize } => log_softmax
);

/// Flattens dims `start_dim..=end_dim` into one (`torch.nn.Flatten(start_dim=1, end_dim=-1)`).
///
/// # Shapes
/// - input: `[N, *]` with the defaults
/// - output: `[N, product of *]`
#[derive(Clone, Copy, Debug)]
pub struct Flatten {
    pub start_dim: isize,
    pub end_dim: isize,
}

impl_module!(Flatten {});

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start_dim: 1, end_dim: -1 }
    }
}

impl Flatten {
    pub fn new(start_dim: isize, end_dim: isize) -> Self {
        Flatten { start_dim, end_dim }
    }
}

impl Forward for Flatten {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.flatten(self.start_dim, self.end_dim)?)
    }
}

/// A dropout layer: the struct (rate `p`, train or eval mode), its constructors, and a forward
/// pass that is the tensor op `$op`.
macro_rules! dropout {
    ($(#[$doc:meta])* $name:ident => $op:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            pub p: f64,
            pub training: bool,
        }

        impl_module!($name { mode: training });

        impl $name {
            /// A layer in training mode that zeroes with probability `p` (PyTorch's default
            /// is 0.5).
            pub fn new(p: f64) -> Self {
                Self { p, training: true }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new(0.5)
            }
        }

        impl Forward for $name {
            fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
                Ok(x.$op(self.p, self.training, None)?)
            }
        }
    };
}

dropout!(
    /// In training, zeroes each element with probability `p` and scales the rest by `1 / (1 - p)`;
    /// in eval, the identity (`torch.nn.Dropout(p=0.5)`). Masks are seeded from the global
    /// generator, so [`liandan_tensor::manual_seed`] makes them reproducible.
    ///
    /// # Shapes
    /// - input: any shape `[*]`
    /// - output: the input's shape
    Dropout => dropout
);

dropout!(
    /// In training, zeroes whole channels with probability `p` and scales the others by
    /// `1 / (1 - p)`; in eval, the identity (`torch.nn.Dropout2d(p=0.5)`).
    ///
    /// # Shapes
    /// - input: `[N, C, H, W]`
    /// - output: `[N, C, H, W]`
    Dropout2d => dropout2d
);
