//! `Embedding`: a lookup table of vectors (`torch.nn.Embedding`).

use liandan_tensor::{DType, Device, Tensor};

use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// Configuration of an [`Embedding`] (`torch.nn.Embedding(num_embeddings, embedding_dim,
/// padding_idx=None)`). `max_norm` and sparse gradients are not supported.
#[derive(Clone, Debug)]
pub struct EmbeddingConfig {
    /// V, the number of rows.
    pub num_embeddings: usize,
    /// D, the width of a row.
    pub embedding_dim: usize,
    /// A row that starts at zero and never receives a gradient (the padding token's), as
    /// PyTorch's `padding_idx`; negative values count from the end. Default none.
    pub padding_idx: Option<i64>,
}

super::with_fields!(EmbeddingConfig { with_padding_idx: padding_idx: Option<i64> });

impl EmbeddingConfig {
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Self {
        EmbeddingConfig { num_embeddings, embedding_dim, padding_idx: None }
    }

    /// A table on `device`, F32, drawn from normal(0, 1) as PyTorch, with the padding row zero.
    pub fn init(&self, device: &Device) -> Result<Embedding> {
        let v = self.num_embeddings as i64;
        let padding_idx = match self.padding_idx {
            None => None,
            Some(p) if (-v..v).contains(&p) => Some(p.rem_euclid(v.max(1)) as usize),
            Some(p) => {
                return Err(liandan_tensor::Error::BadShape {
                    op: "Embedding",
                    shape: vec![self.num_embeddings, self.embedding_dim],
                    detail: format!("padding_idx {p} is outside the table's {v} rows"),
                }
                .into())
            }
        };
        let shape = [self.num_embeddings, self.embedding_dim];
        let mut weight = Tensor::randn(&shape, liandan_tensor::rng::next_seed(), DType::F32, device)?;
        if let Some(p) = padding_idx {
            weight = Tensor::where_cond(&is_row(self.num_embeddings, p, device)?, &Tensor::zeros(&[], DType::F32, device)?, &weight)?;
        }
        Ok(Embedding { weight: weight.requires_grad_(true)?, padding_idx })
    }
}

/// `[V, 1]` Bool, true on row `pad` alone.
fn is_row(rows: usize, pad: usize, device: &Device) -> Result<Tensor> {
    Ok(Tensor::arange(0.0, rows as f64, 1.0, DType::F32, device)?.eq_scalar(pad as f64)?.reshape(&[rows, 1])?)
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
    /// The row that receives no gradient (resolved to `0..V`).
    pub padding_idx: Option<usize>,
}

impl_module!(Embedding { params: [weight] });

impl Forward for Embedding {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let Some(pad) = self.padding_idx else { return Ok(x.embedding(&self.weight)?) };
        // The padding row's value, but no gradient: that row comes from a detached copy.
        let pad_row = is_row(self.weight.shape()[0], pad, self.weight.device())?;
        Ok(x.embedding(&Tensor::where_cond(&pad_row, &self.weight.detach(), &self.weight)?)?)
    }
}
