//! `liandan-train`: optimizers, learning-rate schedulers, data loading and the training loop.
//!
//! - [`optim`]: `torch.optim`'s optimizers behind the [`optim::Optimizer`] trait.
//! - [`sched`]: `torch.optim.lr_scheduler`'s schedulers behind [`sched::LrScheduler`].
//! - [`data`]: datasets and a prefetching [`data::DataLoader`].
//! - [`trainer`]: the training loop, [`Trainer`] (`fit`, `evaluate`, `predict`) with metrics,
//!   callbacks, early stopping, checkpoints, exact resume and the history.

pub use liandan_nn as nn;

pub mod data;
pub mod error;
pub mod optim;
pub mod sched;
pub mod trainer;

pub use error::{Error, Result};
pub use trainer::{FitConfig, Trainer};
