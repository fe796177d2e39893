//! `liandan-nn`: PyTorch's `torch.nn` for liandan, named as PyTorch names it.
//!
//! A model of your own is a struct of layers, one [`impl_module!`] call and a forward:
//!
//! ```
//! use liandan_nn::layers::{Linear, LinearConfig};
//! use liandan_nn::{impl_module, DType, Device, Forward, ModuleExt, Reduction, Tensor};
//!
//! struct Net { fc1: Linear, fc2: Linear }
//! impl_module!(Net { fc1, fc2 });
//!
//! impl Forward for Net {
//!     fn forward_impl(&self, x: &Tensor) -> liandan_nn::Result<Tensor> {
//!         Ok(self.fc2.forward(&self.fc1.forward(x)?.relu()?)?)
//!     }
//! }
//!
//! # fn main() -> liandan_nn::Result<()> {
//! let dev = Device::best()?;
//! let net = Net { fc1: LinearConfig::new(784, 128).init(&dev)?, fc2: LinearConfig::new(128, 10).init(&dev)? };
//! let x = Tensor::randn(&[32, 784], 0, DType::F32, &dev)?;
//! let y = Tensor::from_vec((0..32i64).map(|i| i % 10).collect(), &[32], &dev)?;
//! let loss = net.forward(&x)?.cross_entropy(&y, Reduction::Mean)?;
//! loss.backward()?;
//! assert_eq!(net.state_dict()[0].0, "fc1.weight");
//! # Ok(())
//! # }
//! ```
//!
//! - [`Module`], [`Forward`] and [`ModuleExt`]: tensors found by walking each layer's struct
//!   under PyTorch's state-dict keys; parameters, state dicts, device and dtype moves,
//!   train/eval, save/load. Every layer, and a model of your own, is a struct, one
//!   [`impl_module!`] call and a [`Forward::forward_impl`]; [`Forward::forward`] runs it as a
//!   named layer for summaries, the profiler and anomaly reports.
//! - [`layers`]: each a struct plus an `XxxConfig` with `init(&device)`, initialized as PyTorch
//!   initializes it: linear, convolutions, pooling, normalization, dropout, embedding,
//!   activations, LSTM/GRU, multi-head attention, the Transformer encoder, Sequential.
//! - [`loss`]: the loss modules; [`init`]: `torch.nn.init`.
//! - [`zoo`]: the seven seed models, with PyTorch's architectures and parameter counts.
//! - [`summary`]: a model's layers, output shapes and parameter counts as a table.
//! - [`checkpoint`]: safetensors files that PyTorch reads and writes as its own.
//! - [`export`]: a traced forward pass as an ONNX model (feature `onnx`, on by default).
//!
//! The tensor API is re-exported, and both backends are linked, so that depending on this
//! crate is enough for `Device::best()` to find the GPU. The wgpu backend comes with the
//! default feature `wgpu`; `default-features = false` builds a CPU-only program without
//! compiling wgpu.
//!
//! Errors: [`Error`] and [`Result`] are this crate's (every fallible function here returns
//! them); liandan-tensor's error, which [`Error::Tensor`] wraps, is [`TensorError`], and its
//! `Result` is [`TensorResult`] (what a [`Backend`] of your own returns). A program that also
//! uses liandan-train returns `liandan_train::Result`, whose error wraps this one; `?` works
//! the other way too, since liandan-train turns its errors into [`Error::Other`].

pub use liandan_tensor::*;
// Named, so they shadow the tensor crate's `Error` and `Result` from the glob above.
pub use error::{Error, Result};
pub use liandan_tensor::{Error as TensorError, Result as TensorResult};

// Linking the backends registers their devices with `Device::cpu()` / `Device::best()`.
use liandan_backend_cpu as _;
#[cfg(feature = "wgpu")]
use liandan_backend_wgpu as _;

pub mod checkpoint;
pub mod error;
#[cfg(feature = "onnx")]
pub mod export;
pub mod init;
mod layer_scope;
pub mod layers;
pub mod loss;
pub mod module;
pub mod summary;
pub mod zoo;

pub use module::{join, Forward, Layer, Module, ModuleExt, TensorKind};
