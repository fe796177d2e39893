//! `liandan-nn`: modules, layers, losses, the model zoo and checkpoints.
//!
//! The layers arrive with the nn issue. Today this crate re-exports the tensor API and links the
//! CPU backend, so that depending on it is enough to get a working [`Device`].

pub use liandan_tensor::*;

// Linking the backend registers its device with `Device::cpu()` / `Device::best()`.
use liandan_backend_cpu as _;
