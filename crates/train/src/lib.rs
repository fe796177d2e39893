//! `liandan-train`: optimizers, schedulers and the training loop.
//!
//! The training loop arrives with its own issue; this crate exists so that the workspace's
//! layering (`tensor` <- backends <- `nn` <- `train` <- `liandan`) is in place from the start.

pub use liandan_nn as nn;
