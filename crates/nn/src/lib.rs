//! `liandan-nn`: modules, layers, losses, the model zoo and checkpoints.
//!
//! The layers arrive with the nn issue. Today this crate re-exports the tensor API and links the
//! CPU and wgpu backends, so that depending on it is enough for `Device::best()` to find the GPU.

pub use liandan_tensor::*;

// Linking the backends registers their devices with `Device::cpu()` / `Device::best()`.
use liandan_backend_cpu as _;
use liandan_backend_wgpu as _;
