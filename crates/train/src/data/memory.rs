//! Datasets held in memory: u8 images with labels, host copies of tensors, and subsets.

use std::sync::Arc;

use liandan_tensor::{DType, Tensor};

use super::{out_of_range, rng, Dataset, Sample};
use crate::error::{Error, Result};

/// Images stored as u8 pixels with one label each (MNIST, Fashion-MNIST, CIFAR-10). A sample's
/// input holds the raw pixel values 0..=255 as f32; wrap it in [`super::Transformed`] to scale
/// and normalize them.
#[derive(Clone, Debug)]
pub struct ImageDataset {
    pixels: Arc<[u8]>,
    labels: Arc<[i64]>,
    shape: Vec<usize>,
}

impl ImageDataset {
    /// `pixels` holds `labels.len()` images of `shape` (`[C, H, W]`), one after the other.
    pub fn new(pixels: Vec<u8>, labels: Vec<i64>, shape: &[usize]) -> Result<ImageDataset> {
        let per: usize = shape.iter().product();
        if per == 0 || pixels.len() != per * labels.len() {
            return Err(Error::InvalidArgument {
                op: "ImageDataset::new",
                what: format!("{} pixels do not make {} images of shape {shape:?}", pixels.len(), labels.len()),
            });
        }
        Ok(ImageDataset { pixels: pixels.into(), labels: labels.into(), shape: shape.to_vec() })
    }

    /// The shape of one image.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Every label, in order.
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// The raw pixels of image `index`.
    pub fn pixels(&self, index: usize) -> Result<&[u8]> {
        let per = self.pixels.len() / self.labels.len().max(1);
        self.pixels.get(index * per..(index + 1) * per).ok_or_else(|| out_of_range("ImageDataset::get", index, self.labels.len()))
    }
}

impl Dataset for ImageDataset {
    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let input = self.pixels(index)?.iter().map(|&p| f32::from(p)).collect();
        Ok(Sample { input, shape: self.shape.clone(), target: self.labels[index] })
    }
}

/// A dataset from in-memory tensors (`torch.utils.data.TensorDataset`): row `i` of `inputs`
/// (`[N, ...]`, any float or integer dtype) with element `i` of `targets` (`[N]`, integers).
/// Both are copied to the host once, as f32 and i64.
#[derive(Clone, Debug)]
pub struct TensorDataset {
    inputs: Arc<[f32]>,
    targets: Arc<[i64]>,
    shape: Vec<usize>,
}

impl TensorDataset {
    /// Errors when `targets` is not one-dimensional or its length differs from `inputs`' first
    /// dimension.
    pub fn new(inputs: &Tensor, targets: &Tensor) -> Result<TensorDataset> {
        let n = inputs.shape().first().copied().unwrap_or(0);
        if inputs.rank() == 0 || targets.shape() != [n] {
            return Err(Error::InvalidArgument {
                op: "TensorDataset::new",
                what: format!("inputs {:?} and targets {:?} disagree: targets must be [N] for inputs [N, ...]", inputs.shape(), targets.shape()),
            });
        }
        let shape = inputs.shape()[1..].to_vec();
        let inputs = inputs.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let targets = targets.to_dtype(DType::I64)?.to_vec::<i64>()?;
        TensorDataset::from_vecs(inputs, targets, &shape)
    }

    /// From host values: `inputs` holds `targets.len()` rows of `shape`.
    pub fn from_vecs(inputs: Vec<f32>, targets: Vec<i64>, shape: &[usize]) -> Result<TensorDataset> {
        let per: usize = shape.iter().product();
        if inputs.len() != per * targets.len() {
            return Err(Error::InvalidArgument {
                op: "TensorDataset::from_vecs",
                what: format!("{} values do not make {} rows of shape {shape:?}", inputs.len(), targets.len()),
            });
        }
        Ok(TensorDataset { inputs: inputs.into(), targets: targets.into(), shape: shape.to_vec() })
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.targets.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let per: usize = self.shape.iter().product();
        let target = *self.targets.get(index).ok_or_else(|| out_of_range("TensorDataset::get", index, self.targets.len()))?;
        Ok(Sample { input: self.inputs[index * per..(index + 1) * per].to_vec(), shape: self.shape.clone(), target })
    }
}

/// The samples of `dataset` at `indices`, in that order (`torch.utils.data.Subset`).
#[derive(Clone)]
pub struct Subset {
    dataset: Arc<dyn Dataset>,
    indices: Arc<[usize]>,
}

impl Subset {
    /// Errors when an index is past the dataset's end.
    pub fn new(dataset: Arc<dyn Dataset>, indices: Vec<usize>) -> Result<Subset> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= dataset.len()) {
            return Err(out_of_range("Subset::new", bad, dataset.len()));
        }
        Ok(Subset { dataset, indices: indices.into() })
    }

    /// The indices into the underlying dataset.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl Dataset for Subset {
    fn len(&self) -> usize {
        self.indices.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let &i = self.indices.get(index).ok_or_else(|| out_of_range("Subset::get", index, self.indices.len()))?;
        self.dataset.get(i)
    }

    fn get_seeded(&self, index: usize, seed: u64) -> Result<Sample> {
        let &i = self.indices.get(index).ok_or_else(|| out_of_range("Subset::get", index, self.indices.len()))?;
        self.dataset.get_seeded(i, seed)
    }
}

/// Splits `dataset` into disjoint random subsets of the given lengths, which must add up to
/// its length (`torch.utils.data.random_split` with a seeded generator). The same seed gives
/// the same split on every machine.
pub fn random_split(dataset: Arc<dyn Dataset>, lengths: &[usize], seed: u64) -> Result<Vec<Subset>> {
    let total: usize = lengths.iter().sum();
    if total != dataset.len() {
        return Err(Error::InvalidArgument {
            op: "random_split",
            what: format!("lengths {lengths:?} add up to {total}, not the dataset's {} samples", dataset.len()),
        });
    }
    let order = rng::permutation(total, seed);
    let mut start = 0;
    lengths
        .iter()
        .map(|&n| {
            let part = order[start..start + n].to_vec();
            start += n;
            Subset::new(dataset.clone(), part)
        })
        .collect()
}
