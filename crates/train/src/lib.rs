//! `liandan-train`: optimizers, learning-rate schedulers, data loading and the training loop.
//!
//! A training step with an optimizer and a scheduler, as in PyTorch (updates run on the
//! parameters' device and read nothing back):
//!
//! ```
//! use liandan_train::nn::{zoo, DType, Device, ModuleExt, Tensor};
//! use liandan_train::optim::{clip_grad_norm_, Adadelta, AdadeltaConfig, Optimizer};
//! use liandan_train::sched::{LrScheduler, StepLR};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = Device::cpu();
//! let model = zoo::build("mlp", &dev)?;
//! let mut opt = Adadelta::new(model.named_parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() })?;
//! let mut sched = StepLR::new(&mut opt, 1, 0.7)?; // once per epoch
//! let x = Tensor::rand(&[8, 1024], 0.0, 1.0, 1, DType::F32, &dev)?;
//! let y = Tensor::from_vec((0..8i64).collect::<Vec<_>>(), &[8], &dev)?;
//! for _epoch in 0..2 {
//!     opt.zero_grad();
//!     model.loss(&x, Some(&y))?.backward()?;
//!     let _norm = clip_grad_norm_(&model.parameters(), 1.0, 2.0)?; // a device tensor
//!     opt.step()?;
//!     sched.step(&mut opt, None)?;
//! }
//! assert_eq!(sched.last_lr(), vec![1.0 * 0.7 * 0.7]);
//! let state = opt.state_dict()?; // tensors `fc1.weight.square_avg`, ... and JSON hyper-parameters
//! assert_eq!(state.tensors[0].0, "fc1.weight.square_avg");
//! # Ok(())
//! # }
//! ```
//!
//! - [`optim`]: `torch.optim`'s optimizers behind the [`optim::Optimizer`] trait.
//! - [`sched`]: `torch.optim.lr_scheduler`'s schedulers behind [`sched::LrScheduler`].
//! - [`data`]: datasets and a prefetching [`data::DataLoader`].
//! - [`distributed`]: data-parallel training over several processes (MPI with the `mpi`
//!   feature), as PyTorch's `DistributedDataParallel`.
//! - [`trainer`]: the training loop, [`Trainer`] (`fit`, `evaluate`, `predict`) with metrics,
//!   callbacks, early stopping, checkpoints, exact resume and the history.
//! - `tensorboard`: TensorBoard event files (feature `tensorboard`, on by default), which
//!   `fit` writes when asked.
//!
//! Features, on by default: `wgpu` (the GPU backend), `download` (`data::download`), `plot`
//! (`trainer::plot_history`), `image-folder` (`data::ImageFolder`, JPEG decoding), `csv`
//! (`data::CsvTable`), `tensorboard`. An embedder that needs none of them builds with
//! `default-features = false`.

pub use liandan_nn as nn;

pub mod amp;
pub mod batch_size;
pub mod data;
pub mod distributed;
pub mod error;
pub mod optim;
pub mod sched;
pub mod settings;
#[cfg(feature = "tensorboard")]
pub mod tensorboard;
pub mod trainer;

pub use error::{Error, Result};

/// Hooks for this workspace's tests and benchmarks, not for programs.
#[doc(hidden)]
pub mod testing {
    pub use crate::optim::fused::no_foreach;
}
pub use trainer::{FitConfig, Trainer};
