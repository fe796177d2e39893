//! Datasets and the data loader.
//!
//! A [`Dataset`] hands out one [`Sample`] by index, on the host. The `DataLoader` (arriving
//! with the data issue) batches samples into device tensors.

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
}
