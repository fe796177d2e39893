//! Datasets and the data loader (`torch.utils.data` and `torchvision.datasets`).
//!
//! A [`Dataset`] hands out one [`Sample`] by index, on the host. A [`DataLoader`] batches
//! samples into device tensors on worker threads, shuffled by a seed, and uploads the next
//! batch while the current step runs.
//!
//! - Datasets: [`Mnist`] (MNIST and Fashion-MNIST from IDX files), [`cifar10`], [`NpyDataset`]
//!   (memory-mapped `.npy` arrays), [`TensorDataset`] (in-memory tensors), [`Synthetic`]
//!   (seeded random images), and [`bundled_mnist`]: MNIST's 10,000 test images built into the
//!   binary (8,000 to train on, 2,000 held out), for training with no download.
//! - The user's own data: `ImageFolder` (torchvision's layout of PNG and JPEG images, one
//!   folder per class; feature `image-folder`) and `CsvTable` (a CSV file with a header row;
//!   feature `csv`), each describing its classes and preparation as a [`DataInfo`] that
//!   checkpoints keep.
//! - Transforms ([`Transform`]): to-float with scaling, per-channel normalization, random crop
//!   with padding, random horizontal flip; random ones are seeded by `(seed, epoch, index)`.
//! - `download` (the default feature of the same name): full MNIST, Fashion-MNIST and
//!   CIFAR-10 into a cache directory, checked against SHA-256 sums.
//!
//! ```
//! use liandan_train::data::{bundled_mnist, DataLoader};
//! use liandan_train::nn::Device;
//! # use liandan_backend_cpu as _; // links the CPU backend
//!
//! let (train, _val) = bundled_mnist()?;               // 8,000 + 2,000 normalized images
//! let loader = DataLoader::new(train, 64, &Device::cpu())?.shuffle(42).drop_last(true);
//! assert_eq!(loader.len(), 125);
//! for batch in loader.iter(0)?.take(2) {
//!     let batch = batch?;
//!     assert_eq!(batch.input.shape(), &[64, 1, 28, 28]); // f32, on the device
//!     assert_eq!(batch.target.shape(), &[64]);           // i64 class indices
//! }
//! # Ok::<(), liandan_train::Error>(())
//! ```

mod bundled;
mod cifar;
#[cfg(feature = "download")]
pub mod download;
pub mod fuzz;
mod idx;
#[cfg(feature = "image-folder")]
mod image_folder;
#[cfg(feature = "image-folder")]
mod image_io;
mod info;
mod loader;
mod memory;
mod npy;
pub mod rng;
mod synthetic;
#[cfg(feature = "csv")]
mod table;
mod transform;

pub use bundled::{bundled_mnist, bundled_mnist_raw, bundled_mnist_val_indices, bundled_mnist_with, MNIST_MEAN, MNIST_STD};
pub use cifar::{cifar10, parse_cifar};
pub use idx::{parse_idx, read_idx, IdxArray, Mnist, Split};
#[cfg(feature = "image-folder")]
pub use image_folder::{ImageFolder, ImageFolderConfig};
#[cfg(feature = "image-folder")]
pub use image_io::{load_image, ImageShape, Unreadable};
pub use info::{DataInfo, InputInfo};
pub use loader::{collate, Batch, DataLoader, HostBatch};
pub use memory::{random_split, ImageDataset, Subset, TensorDataset};
pub use npy::{parse_npy, NpyArray, NpyDType, NpyDataset};
pub use synthetic::Synthetic;
#[cfg(feature = "csv")]
pub use table::CsvTable;
pub use transform::{Transform, Transformed};

use std::sync::Arc;

use crate::error::Result;

/// One example on the host: the input's values and shape, and its target.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The input, row-major, already converted to f32 (`[C, H, W]` for images).
    pub input: Vec<f32>,
    /// The input's shape.
    pub shape: Vec<usize>,
    /// The target: a class index for classification.
    pub target: i64,
}

/// A collection of samples addressed by index (`torch.utils.data.Dataset`).
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// Whether the dataset has no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `index`; an error when `index >= len()` or the data behind it is unreadable.
    fn get(&self, index: usize) -> Result<Sample>;

    /// Sample `index` with `seed` for its random transforms. The [`DataLoader`] calls this with
    /// a seed derived from its own seed, the epoch and `index`, so augmentations change every
    /// epoch yet are the same on every machine and for every worker count. Datasets without
    /// randomness ignore the seed.
    fn get_seeded(&self, index: usize, seed: u64) -> Result<Sample> {
        let _ = seed;
        self.get(index)
    }
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        (**self).get(index)
    }
    fn get_seeded(&self, index: usize, seed: u64) -> Result<Sample> {
        (**self).get_seeded(index, seed)
    }
}

/// The error for an index past a dataset's end.
pub(crate) fn out_of_range(what: &'static str, index: usize, len: usize) -> crate::Error {
    crate::Error::InvalidArgument { op: what, what: format!("index {index} is out of range for a dataset of {len} samples") }
}
