//! The bundled offline default: MNIST's real 10,000-image test split, built into the binary
//! (`crates/train/data/mnist/`, 1.6 MB gzipped), so that training works with no download.

use std::path::Path;
use std::sync::Arc;

use super::{random_split, Dataset, ImageDataset, Mnist, Subset, Transform, Transformed};
use crate::error::Result;

/// MNIST's pixel mean and standard deviation over its training split, as PyTorch's MNIST
/// example normalizes with them; using the same constants lets checkpoints move between the two.
pub const MNIST_MEAN: f32 = 0.1307;
/// See [`MNIST_MEAN`].
pub const MNIST_STD: f32 = 0.3081;

const IMAGES: &[u8] = include_bytes!("../../data/mnist/t10k-images-idx3-ubyte.gz");
const LABELS: &[u8] = include_bytes!("../../data/mnist/t10k-labels-idx1-ubyte.gz");

/// The seed of the fixed 8,000 / 2,000 split; changing it changes which images validate.
const SPLIT_SEED: u64 = 0x6d6e_6973_7453_504c;
/// Images in the training part of the split; the rest validate.
const TRAIN_LEN: usize = 8000;

/// The bundled images as raw pixels (`[1, 28, 28]`, values 0..=255), all 10,000, in file order.
pub fn bundled_mnist_raw() -> Result<ImageDataset> {
    let images = super::parse_idx(IMAGES, Path::new("<bundled>/t10k-images-idx3-ubyte.gz"))?;
    let labels = super::parse_idx(LABELS, Path::new("<bundled>/t10k-labels-idx1-ubyte.gz"))?;
    Mnist::from_arrays(images, Path::new("<bundled>/t10k-images-idx3-ubyte.gz"), labels, Path::new("<bundled>/t10k-labels-idx1-ubyte.gz"))
}

/// The bundled MNIST images split 8,000 train / 2,000 validation with a fixed seed, each
/// sample `[1, 28, 28]` scaled to `[0, 1]` and normalized with [`MNIST_MEAN`] and [`MNIST_STD`].
///
/// The images are MNIST's test split: a model trained on them has seen 8,000 of MNIST's
/// 10,000 test images, so its honest score is on the 2,000 held out
/// ([`bundled_mnist_val_indices`]), not on MNIST's test split.
pub fn bundled_mnist() -> Result<(Transformed, Transformed)> {
    bundled_mnist_with(vec![Transform::ToFloat { scale: 1.0 / 255.0 }, Transform::Normalize { mean: vec![MNIST_MEAN], std: vec![MNIST_STD] }])
}

/// The split of [`bundled_mnist`] with `transforms` applied to the raw pixels (0..=255) in its
/// place: `vec![Transform::ToFloat { scale: 1.0 / 255.0 }]` alone gives values in `[0, 1]`, as a
/// VAE's binary cross-entropy wants them.
pub fn bundled_mnist_with(transforms: Vec<Transform>) -> Result<(Transformed, Transformed)> {
    let [train, val] = split()?;
    Ok((Transformed::new(Arc::new(train), transforms.clone())?, Transformed::new(Arc::new(val), transforms)?))
}

/// Which of MNIST's test images (indices into `t10k-images-idx3-ubyte`, in the validation
/// set's order) [`bundled_mnist`] holds out for validation: the same 2,000 in every run.
pub fn bundled_mnist_val_indices() -> Result<Vec<usize>> {
    let [_, val] = split()?;
    Ok(val.indices().to_vec())
}

fn split() -> Result<[Subset; 2]> {
    let all: Arc<dyn Dataset> = Arc::new(bundled_mnist_raw()?);
    let parts = random_split(all.clone(), &[TRAIN_LEN, all.len() - TRAIN_LEN], SPLIT_SEED)?;
    parts.try_into().map_err(|_| crate::Error::State { op: "bundled_mnist", detail: "random_split gave other than two parts".into() })
}
