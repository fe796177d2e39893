//! `Embedding`: a lookup table of vectors (`torch.nn.Embedding`).

use liandan_tensor::{DType, Device, Tensor};

use crate::error::Result;
use crate::module::{join, Forward, Module, TensorKind};

/// Configuration of an [`Embedding`] (`torch.nn.Embedding(num_embeddings, embedding_dim)`).
/// `padding_idx`, `max_norm` and sparse gradients are not supported.
#[derive(Clone, Debug)]
pub struct EmbeddingConfig {
    /// V, the number of rows.
    pub num_embeddings: usize,
    /// D, the width of a row.
    pub embedding_dim: usize,
}

impl EmbeddingConfig {
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Self {
        EmbeddingConfig { num_embeddings, embedding_dim }
    }

    /// A table on `device`, F32, drawn from normal(0, 1) as PyTorch.
    pub fn init(&self, device: &Device) -> Result<Embedding> {
        let shape = [self.num_embeddings, self.embedding_dim];
        let weight = Tensor::randn(&shape, liandan_tensor::rng::next_seed(), DType::F32, device)?.requires_grad_(true)?;
        Ok(Embedding { weight })
    }
}

/// Rows of `weight` picked by integer indices.
///
/// State-dict keys: `weight`.
///
/// # Shapes
/// - input: I64 indices of any shape `[*]`, each in `0..V`
/// - `weight`: `[V, D]`
/// - output: `[*, D]`
#[derive(Clone, Debug)]
pub struct Embedding {
    pub weight: Tensor,
}

impl Module for Embedding {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f(&join(prefix, "weight"), &self.weight, TensorKind::Parameter);
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        f(&join(prefix, "weight"), &mut self.weight, TensorKind::Parameter)
    }

    fn set_training(&mut self, _training: bool) {}
}

impl Forward for Embedding {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::summary::scope(self, || {
            Ok(x.embedding(&self.weight)?)
        })
    }
}
