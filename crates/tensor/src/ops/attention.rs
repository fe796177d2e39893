//! Scaled dot-product attention, a composite of matmul, masking and softmax.
//!
//! Dimension letters: L query length, S key length, E query/key width, Ev value width.

use crate::dtype::{Bool8, DType};
use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

impl Tensor {
    /// `softmax(q k^T * scale + mask) v` (`torch.nn.functional.scaled_dot_product_attention`,
    /// without dropout), with `self` as the queries. `scale` defaults to `1 / sqrt(E)`.
    ///
    /// `attn_mask` broadcasts to `[*, L, S]`: a bool mask keeps the positions where it is true
    /// (the others get `-inf` before the softmax); a float mask of the query's dtype is added.
    /// `is_causal` keeps key `j <= i` for query `i` (the top-left aligned lower triangle, as
    /// PyTorch) and cannot be combined with `attn_mask`. A query whose keys are all masked
    /// gets NaN, as in PyTorch's math kernel. Under f16 autocast the probabilities are f16,
    /// computed in f32 inside one kernel where the device has one, as PyTorch's attention
    /// computes them there.
    ///
    /// # Shapes
    /// - `self` (queries): `[*, L, E]`; `key`: `[*, S, E]`; `value`: `[*, S, Ev]` (batch dims
    ///   `*` broadcast)
    /// - result: `[*, L, Ev]`
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        is_causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor> {
        const OP: &str = "scaled_dot_product_attention";
        check_float(OP, self)?;
        for t in [key, value] {
            check_same_dtype(OP, self, t)?;
            check_same_device(OP, self, t)?;
        }
        let (qs, ks, vs) = (self.shape(), key.shape(), value.shape());
        if qs.len() < 2 || ks.len() < 2 || vs.len() < 2 {
            return Err(Error::shape(OP, qs, ks, "query and key must be [*, L, E] and [*, S, E] (value [*, S, Ev])"));
        }
        let (r, kr, vr) = (qs.len(), ks.len(), vs.len());
        if qs[r - 1] != ks[kr - 1] {
            return Err(Error::shape(OP, qs, ks, "query and key disagree on the width E"));
        }
        if ks[kr - 2] != vs[vr - 2] {
            return Err(Error::shape(OP, ks, vs, "key and value disagree on the length S"));
        }
        let batch = broadcast_shapes(OP, &qs[..r - 2], &ks[..kr - 2])
            .map_err(|_| Error::shape(OP, qs, ks, "query and key have batch dims that cannot be broadcast"))?;
        broadcast_shapes(OP, &batch, &vs[..vr - 2]).map_err(|_| Error::shape(OP, qs, vs, "query and value have batch dims that cannot be broadcast"))?;
        let (l, s, e) = (qs[r - 2], ks[kr - 2], qs[r - 1]);
        let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
        let scores = self.matmul(&key.transpose(-2isize, -1isize)?)?.mul_scalar(scale)?; // [*, L, S]
        let neg_inf = || self.scalar_like(f64::NEG_INFINITY);
        let scores = match (attn_mask, is_causal) {
            (Some(m), true) => return Err(Error::shape(OP, scores.shape(), m.shape(), "an explicit attn_mask cannot be combined with is_causal")),
            (Some(m), false) => {
                check_same_device(OP, self, m)?;
                broadcast_shapes(OP, scores.shape(), m.shape())
                    .map_err(|_| Error::shape(OP, scores.shape(), m.shape(), "attention scores and attn_mask cannot be broadcast together"))?;
                match m.dtype() {
                    DType::Bool => Tensor::where_cond(m, &scores, &neg_inf()?)?,
                    dt if dt == self.dtype() => scores.add(m)?,
                    dt => return Err(Error::dtype(OP, dt, format!("attn_mask must be bool or the query's dtype {}", self.dtype()))),
                }
            }
            (None, true) => {
                let tril: Vec<Bool8> = (0..l * s).map(|f| Bool8((f % s <= f / s) as u8)).collect();
                let keep = Tensor::from_vec(tril, &[l, s], self.device())?;
                Tensor::where_cond(&keep, &scores, &neg_inf()?)?
            }
            (None, false) => scores,
        };
        // Under autocast, f16 scores become f16 probabilities in one kernel, as PyTorch's.
        let probs = match crate::autocast::autocast_dtype() {
            Some(_) => scores.softmax_low_fused()?,
            None => None,
        };
        match probs {
            Some(p) => p.matmul(value),
            None => scores.softmax(-1isize)?.matmul(value),
        }
    }
}
