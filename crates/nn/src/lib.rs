//! `liandan-nn`: modules, layers, losses, the model zoo and checkpoints.
//!
//! Today: [`checkpoint`], safetensors files that PyTorch reads and writes as its own (atomic
//! writes; strict and non-strict state-dict loading); the tensor API, re-exported; and both
//! backends linked, so that depending on this crate is enough for `Device::best()` to find the
//! GPU; and the module system: [`Module`] (tensors found by walking each layer's struct, named
//! with PyTorch's state-dict keys), [`Forward`], [`ModuleExt`] (parameters, state dicts,
//! devices, dtypes, train/eval, save/load) and the [`layers`], each a struct plus a
//! `XxxConfig` with `init(&device)`. Recurrent layers, attention and the model zoo are still
//! to come.

pub use liandan_tensor::*;

// Linking the backends registers their devices with `Device::cpu()` / `Device::best()`.
use liandan_backend_cpu as _;
use liandan_backend_wgpu as _;

pub mod checkpoint;
pub mod error;
pub mod init;
pub mod layers;
pub mod loss;
pub mod module;
pub mod summary;
pub mod zoo;

pub use module::{join, Forward, Layer, Module, ModuleExt, TensorKind};
