//! Attention: `MultiheadAttention` (`torch.nn.MultiheadAttention`), built from existing ops
//! (linear, matmul, softmax, `where_cond` for masks, `scaled_dot_product_attention`), so every
//! gradient comes from their backward rules. The Transformer encoder is in `transformer.rs`.
//!
//! Dimension letters: N batch, L query length, S key length, E embedding width, H heads,
//! `hd = E / H` the width of one head.

use liandan_tensor::{DType, Device, Tensor};

use super::{default_bound, uniform_param, with_fields, Linear};
use crate::error::{Error, Result};
use crate::impl_module;
use crate::module::Forward;

const MHA: &str = "MultiheadAttention";

fn shape_err(op: &'static str, lhs: &[usize], rhs: &[usize], detail: impl Into<String>) -> Error {
    liandan_tensor::Error::ShapeMismatch { op, lhs: lhs.to_vec(), rhs: rhs.to_vec(), detail: detail.into() }.into()
}

fn bad_shape(op: &'static str, shape: &[usize], detail: impl Into<String>) -> Error {
    liandan_tensor::Error::BadShape { op, shape: shape.to_vec(), detail: detail.into() }.into()
}

/// Configuration of a [`MultiheadAttention`] (`torch.nn.MultiheadAttention(embed_dim,
/// num_heads, dropout=0.0, bias=True, batch_first=False)`). Keys and values have the query's
/// width (`kdim = vdim = embed_dim`); `add_bias_kv` and `add_zero_attn` are not supported.
#[derive(Clone, Debug)]
pub struct MultiheadAttentionConfig {
    /// E, the width of queries, keys, values and output.
    pub embed_dim: usize,
    /// H; must divide `embed_dim`.
    pub num_heads: usize,
    /// Dropout on the attention weights, in training only; default 0.
    pub dropout: f64,
    /// Biases on the input and output projections; default true.
    pub bias: bool,
    /// Inputs and output as `[N, L, E]` instead of `[L, N, E]`; default false.
    pub batch_first: bool,
}

with_fields!(MultiheadAttentionConfig { with_dropout: dropout: f64, with_bias: bias: bool, with_batch_first: batch_first: bool });

impl MultiheadAttentionConfig {
    pub fn new(embed_dim: usize, num_heads: usize) -> Self {
        MultiheadAttentionConfig { embed_dim, num_heads, dropout: 0.0, bias: true, batch_first: false }
    }

    /// A layer on `device` in training mode, F32, initialized as PyTorch: `in_proj_weight`
    /// xavier-uniform (±√(6 / (E + 3E))), `out_proj.weight` uniform(±1/√E), biases zero.
    pub fn init(&self, device: &Device) -> Result<MultiheadAttention> {
        let e = self.embed_dim;
        if self.num_heads == 0 || !e.is_multiple_of(self.num_heads) {
            return Err(bad_shape(MHA, &[e], format!("embed_dim must be divisible by num_heads = {}", self.num_heads)));
        }
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(bad_shape(MHA, &[e], format!("dropout probability {} is outside [0, 1]", self.dropout)));
        }
        let zeros = |n: usize| -> Result<Tensor> { Ok(Tensor::zeros(&[n], DType::F32, device)?.requires_grad_(true)?) };
        let in_proj_weight = uniform_param(&[3 * e, e], (6.0 / (4 * e) as f64).sqrt(), device)?;
        let in_proj_bias = if self.bias { Some(zeros(3 * e)?) } else { None };
        let out_proj = Linear { weight: uniform_param(&[e, e], default_bound(e), device)?, bias: if self.bias { Some(zeros(e)?) } else { None } };
        Ok(MultiheadAttention { in_proj_weight, in_proj_bias, out_proj, config: self.clone(), training: true })
    }
}

/// Multi-head scaled dot-product attention with packed input projections
/// (`torch.nn.MultiheadAttention`): queries, keys and values are projected by the three
/// `[E, E]` blocks of `in_proj_weight`, split into H heads of width `hd`, attended
/// (`softmax(q k^T / √hd + mask) v`), merged and projected by `out_proj`.
///
/// State-dict keys: `in_proj_weight`, `in_proj_bias`, `out_proj.weight`, `out_proj.bias`.
///
/// # Shapes
/// - `query`: `[L, N, E]` (`[N, L, E]` with `batch_first`) or unbatched `[L, E]`
/// - `key`, `value`: `[S, N, E]` (`[N, S, E]`) or unbatched `[S, E]`
/// - `key_padding_mask`: `[N, S]` (unbatched `[S]`)
/// - `attn_mask`: `[L, S]` or `[N * H, L, S]` (unbatched `[H, L, S]`)
/// - `in_proj_weight`: `[3E, E]`, `in_proj_bias`: `[3E]`, `out_proj.weight`: `[E, E]`,
///   `out_proj.bias`: `[E]`
/// - output: the query's shape; weights `[N, L, S]` averaged over heads or `[N, H, L, S]`
///   (unbatched `[L, S]` or `[H, L, S]`)
#[derive(Clone, Debug)]
pub struct MultiheadAttention {
    pub in_proj_weight: Tensor,
    pub in_proj_bias: Option<Tensor>,
    pub out_proj: Linear,
    pub config: MultiheadAttentionConfig,
    pub training: bool,
}

impl_module!(MultiheadAttention { params: [in_proj_weight, in_proj_bias], modules: [out_proj], mode: training });

/// A mask as the additive float mask PyTorch turns it into: bool `true` (not allowed to
/// attend) becomes `-inf` and `false` 0; a float mask is added as it is.
fn additive_mask(mask: &Tensor, like: &Tensor, name: &str) -> Result<Tensor> {
    match mask.dtype() {
        DType::Bool => {
            let (masked, kept) = (Tensor::scalar(f64::NEG_INFINITY, like.dtype(), like.device())?, Tensor::scalar(0.0, like.dtype(), like.device())?);
            Ok(Tensor::where_cond(mask, &masked, &kept)?)
        }
        dt if dt.is_float() => Ok(mask.to_dtype(like.dtype())?),
        dt => Err(liandan_tensor::Error::BadDType {
            op: MHA,
            got: dt,
            detail: format!("{name} must be bool (true = may not attend) or float (added to the scores)"),
        }
        .into()),
    }
}

impl MultiheadAttention {
    /// Attention of `query` over `key`/`value`, as `torch.nn.MultiheadAttention.forward`.
    ///
    /// Masks are bool (`true` = may not attend) or float (added to the scores); both are
    /// combined when given. A query whose keys are all masked gets NaN, as in PyTorch. With
    /// `need_weights` the attention weights (after dropout, as PyTorch) come back too, averaged
    /// over heads when `average_attn_weights`; without, the attention runs through
    /// [`Tensor::scaled_dot_product_attention`] (unless dropout is active). See the type's
    /// `# Shapes`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_qkv(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        key_padding_mask: Option<&Tensor>,
        attn_mask: Option<&Tensor>,
        need_weights: bool,
        average_attn_weights: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        crate::summary::scope(self, || {
            let c = &self.config;
            let (e, h) = (c.embed_dim, c.num_heads);
            let hd = e / h;
            let batched = match query.rank() {
                3 => true,
                2 => false,
                _ => return Err(bad_shape(MHA, query.shape(), "the query must be [L, N, E], [N, L, E] (batch_first) or unbatched [L, E]")),
            };
            for (name, t) in [("key", key), ("value", value)] {
                if t.rank() != query.rank() {
                    return Err(shape_err(MHA, query.shape(), t.shape(), format!("query and {name} must both be batched (3-D) or both unbatched (2-D)")));
                }
            }
            if key.shape() != value.shape() {
                return Err(shape_err(MHA, key.shape(), value.shape(), "key and value must have the same shape"));
            }
            // Unbatched inputs are a batch of one, seq-first (PyTorch ignores batch_first for them).
            let batch_first = c.batch_first && batched;
            let unbatch = |t: &Tensor| {
                if batched {
                    Ok(t.clone())
                } else {
                    t.unsqueeze(1)
                }
            };
            let (q, k, v) = (unbatch(query)?, unbatch(key)?, unbatch(value)?);
            let (l_ax, n_ax) = if batch_first { (1, 0) } else { (0, 1) };
            let (l, n, s) = (q.shape()[l_ax], q.shape()[n_ax], k.shape()[l_ax]);
            if q.shape()[2] != e {
                return Err(bad_shape(MHA, query.shape(), format!("the query's last dim must be embed_dim = {e}")));
            }
            if k.shape()[2] != e || k.shape()[n_ax] != n {
                return Err(shape_err(MHA, query.shape(), key.shape(), format!("the key must have the query's batch size {n} and width embed_dim = {e}")));
            }

            // The mask added to the [N*H, L, S] scores: attn_mask as [1 or N*H, L, S] plus the
            // padding mask as [N*H, 1, S].
            let mut mask = None;
            if let Some(m) = attn_mask {
                let m3 = match m.rank() {
                    2 if m.shape() == [l, s] => m.unsqueeze(0)?,
                    3 if m.shape() == [n * h, l, s] => m.clone(),
                    _ => {
                        return Err(shape_err(
                            MHA,
                            query.shape(),
                            m.shape(),
                            format!("attn_mask must be [L, S] = [{l}, {s}] or [N * num_heads, L, S] = [{}, {l}, {s}]", n * h),
                        ))
                    }
                };
                mask = Some(additive_mask(&m3, &q, "attn_mask")?);
            }
            if let Some(m) = key_padding_mask {
                let want: &[usize] = if batched { &[n, s] } else { &[s] };
                if m.shape() != want {
                    return Err(shape_err(MHA, key.shape(), m.shape(), format!("key_padding_mask must be {want:?} ([N, S], unbatched [S])")));
                }
                let m = additive_mask(m, &q, "key_padding_mask")?.reshape(&[n, 1, 1, s])?.expand(&[n, h, 1, s])?.reshape(&[n * h, 1, s])?;
                mask = Some(match mask {
                    Some(a) => a.add(&m)?,
                    None => m,
                });
            }

            // Input projections: one GEMM for self-attention, as PyTorch's packed path.
            let w = &self.in_proj_weight;
            let (qp, kp, vp) = if query.id() == key.id() && key.id() == value.id() {
                let mut p = q.linear(w, self.in_proj_bias.as_ref())?.chunk(3, -1isize)?.into_iter();
                let mut next = || p.next().expect("three chunks");
                (next(), next(), next())
            } else {
                let proj = |x: &Tensor, i: usize| -> Result<Tensor> {
                    let b = self.in_proj_bias.as_ref().map(|b| b.narrow(0usize, i * e, e)).transpose()?;
                    Ok(x.linear(&w.narrow(0usize, i * e, e)?, b.as_ref())?)
                };
                (proj(&q, 0)?, proj(&k, 1)?, proj(&v, 2)?)
            };
            // [L, N, E] or [N, L, E] -> [N, H, L, hd], a view.
            let split_heads = |t: &Tensor| -> Result<Tensor> {
                let sh = t.shape();
                let perm: &[usize] = if batch_first { &[0, 2, 1, 3] } else { &[1, 2, 0, 3] };
                Ok(t.reshape(&[sh[0], sh[1], h, hd])?.permute(perm)?)
            };
            let (qh, kh, vh) = (split_heads(&qp)?, split_heads(&kp)?, split_heads(&vp)?);
            let dropout = if self.training { c.dropout } else { 0.0 };
            let weighted = need_weights || dropout > 0.0;
            // Unmasked attention takes the heads as they are (a fused kernel reads the views);
            // otherwise they are [N*H, len, hd], as the masks.
            let (qh, kh, vh) = match weighted || mask.is_some() {
                false => (qh, kh, vh),
                true => (qh.reshape(&[n * h, l, hd])?, kh.reshape(&[n * h, s, hd])?, vh.reshape(&[n * h, s, hd])?),
            };
            let (heads, weights) = if weighted {
                // PyTorch scales the queries before the product on this path.
                let mut scores = qh.mul_scalar(1.0 / (hd as f64).sqrt())?.matmul(&kh.transpose(1usize, 2usize)?)?;
                if let Some(m) = &mask {
                    scores = scores.add(m)?;
                }
                let w = scores.softmax(-1isize)?.dropout(dropout, true, None)?;
                (w.matmul(&vh)?, Some(w))
            } else {
                (qh.scaled_dot_product_attention(&kh, &vh, mask.as_ref(), false, None)?, None)
            };

            // [N*H, L, hd] -> [L, N, E] or [N, L, E], then the output projection (called as a
            // function, as PyTorch does, so summaries show no `Linear` row inside attention).
            let (perm, merged): (&[usize], [usize; 3]) = if batch_first { (&[0, 2, 1, 3], [n, l, e]) } else { (&[2, 0, 1, 3], [l, n, e]) };
            let merged = heads.reshape(&[n, h, l, hd])?.permute(perm)?.reshape(&merged)?;
            let mut out = merged.linear(&self.out_proj.weight, self.out_proj.bias.as_ref())?;
            let mut weights = match weights.filter(|_| need_weights) {
                Some(w) if average_attn_weights => Some(w.reshape(&[n, h, l, s])?.mean(&[1], false)?),
                Some(w) => Some(w.reshape(&[n, h, l, s])?),
                None => None,
            };
            if !batched {
                out = out.squeeze(1usize)?;
                weights = weights.map(|w| w.squeeze(0usize)).transpose()?;
            }
            Ok((out, weights))
        })
    }
}

/// Self-attention of `x` without masks; the output only.
impl Forward for MultiheadAttention {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_qkv(x, x, x, None, None, false, true)?.0)
    }
}
