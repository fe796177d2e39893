//! `liandan-tensor`: one [`Tensor`] type over pluggable backends, with reverse-mode autograd.
//!
//! A tensor lives on a [`Device`], picked at run time ([`Device::best`]). Backends implement the
//! small kernel trait [`backend::Backend`]; everything else (views, broadcasting, composite ops,
//! gradients) is written once, here. `docs/adding-an-op.md` in the repository lists the
//! primitives and the checklist for adding one.
//!
//! ```
//! use liandan_tensor::{Device, DType, Tensor};
//! # use liandan_backend_cpu as _;
//! let dev = Device::cpu();
//! let w = Tensor::randn(&[3, 2], 0, DType::F32, &dev)?.requires_grad_(true)?;
//! let x = Tensor::ones(&[4, 3], DType::F32, &dev)?;
//! let loss = x.matmul(&w)?.relu()?.sum_all()?;
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().shape(), &[3, 2]);
//! # Ok::<(), liandan_tensor::Error>(())
//! ```

pub mod autocast;
pub mod autograd;
pub mod backend;
pub mod custom;
pub mod device;
pub mod dtype;
pub mod error;
pub mod fallback;
pub mod fused;
mod grad_mode;
mod index_use;
pub mod layout;
pub mod observe;
pub mod ops;
pub mod profile;
pub mod rng;
pub mod settings;
mod tensor;
#[doc(hidden)]
pub mod testing;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use autocast::{autocast, autocast_dtype, autocast_lowered, autocast_min_ops, cast_ahead, AutocastGuard, MinOps};
pub use autograd::{is_grad_enabled, no_grad, HookHandle, NoGradGuard};
pub use backend::{Backend, BackendStorage, ConvGeometry, CustomKernel, DeviceKind, Distribution, HostRead, MemoryStats, Storage, Strided};
pub use custom::CustomOp;
pub use device::{BackendProvider, Device};
pub use dtype::{Bool8, DType, Element};
pub use error::{Error, Result};
pub use fused::{fusion_enabled, no_fusion, BatchNormOptions, LayerNormOptions, NoFusionGuard};
pub use index_use::{current_index_use, IndexUse};
pub use layout::Layout;
pub use ops::{CrossEntropyOptions, Dim, KlReduction, Reduction};
pub use rng::manual_seed;
pub use tensor::{LaterRead, Tensor};

#[doc(hidden)]
pub use inventory;
