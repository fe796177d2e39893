//! Functional building blocks of the nn layers, all composites: `linear`, `embedding`,
//! `group_norm`, `dropout2d` and `scaled_dot_product_attention`.
//!
//! Dimension letters: N batch, C channels, G groups, V vocabulary, D embedding width, L query
//! length, S key length, E query/key width, Ev value width.

use crate::dtype::{Bool8, DType};
use crate::error::{Error, Result};
use crate::layout::broadcast_shapes;
use crate::ops::{check_float, check_index, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

impl Tensor {
    /// `x @ weight^T + bias` (`torch.nn.functional.linear`). Leading dims are folded into one
    /// matrix so the product is a single GEMM.
    ///
    /// # Shapes
    /// - `self`: `[*, in]` (any number of leading dims, including none)
    /// - `weight`: `[out, in]`, `bias`: `[out]`
    /// - result: `[*, out]`
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias])? {
            return x.linear(&w, b.as_ref());
        }
        const OP: &str = "linear";
        check_float(OP, self)?;
        check_same_dtype(OP, self, weight)?;
        check_same_device(OP, self, weight)?;
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.is_empty() || ws.len() != 2 || xs[xs.len() - 1] != ws[1] {
            return Err(Error::shape(OP, xs, ws, "must be an [*, in] input and an [out, in] weight"));
        }
        let (fan_in, fan_out) = (ws[1], ws[0]);
        let mut out_shape = xs.to_vec();
        *out_shape.last_mut().expect("rank >= 1") = fan_out;
        let out = if xs.len() <= 2 {
            self.matmul(&weight.t()?)?
        } else {
            let m = self.numel() / fan_in.max(1);
            self.reshape(&[m, fan_in])?.matmul(&weight.t()?)?.reshape(&out_shape)?
        };
        match bias {
            None => Ok(out),
            Some(b) if b.shape() == [fan_out] => out.add(b),
            Some(b) => Err(Error::shape(OP, ws, b.shape(), format!("weight and bias disagree: the bias must be [out] = [{fan_out}]"))),
        }
    }

    /// Rows of `weight` picked by the i64 indices in `self` (`torch.nn.functional.embedding`);
    /// the gradient scatters back into the picked rows.
    ///
    /// # Shapes
    /// - `self`: i64 indices of any shape `[*]`, each in `0..V`
    /// - `weight`: `[V, D]`
    /// - result: `[*, D]`
    pub fn embedding(&self, weight: &Tensor) -> Result<Tensor> {
        check_index("embedding", self)?;
        check_same_device("embedding", self, weight)?;
        if weight.rank() != 2 {
            return Err(Error::shape("embedding", self.shape(), weight.shape(), "must be i64 indices of any shape and a 2-D [V, D] weight"));
        }
        let flat = self.reshape(&[self.numel()])?;
        let mut shape = self.shape().to_vec();
        shape.push(weight.shape()[1]);
        weight.index_select(0usize, &flat)?.reshape(&shape)
    }

    /// Group normalization (`torch.nn.functional.group_norm`): channels are split into
    /// `groups` consecutive groups, each normalized over its channels and all spatial positions
    /// (biased variance), then scaled and shifted per channel.
    ///
    /// # Shapes
    /// - `self`: `[N, C, *]`, with `C` divisible by `groups`
    /// - `weight`, `bias`: `[C]`
    /// - result: `[N, C, *]`
    pub fn group_norm(&self, groups: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.group_norm(groups, weight, bias, eps);
        }
        const OP: &str = "group_norm";
        check_float(OP, self)?;
        let s = self.shape();
        if s.len() < 2 || groups == 0 || !s[1].is_multiple_of(groups) {
            return Err(Error::bad_shape(OP, s, format!("expects [N, C, *] with C divisible by groups = {groups}")));
        }
        let c = s[1];
        for (name, p) in [("weight", weight), ("bias", bias)] {
            if let Some(p) = p {
                if p.shape() != [c] {
                    return Err(Error::shape(OP, s, p.shape(), format!("input and {name} disagree: the {name} must be [C] = [{c}]")));
                }
            }
        }
        let per_group = self.numel() / (s[0] * groups).max(1);
        let mut out = self.reshape(&[s[0], groups, per_group])?.layer_norm(1, None, None, eps)?.reshape(s)?;
        let mut cshape = vec![1; s.len()];
        cshape[1] = c;
        if let Some(w) = weight {
            out = out.mul(&w.reshape(&cshape)?)?;
        }
        if let Some(b) = bias {
            out = out.add(&b.reshape(&cshape)?)?;
        }
        Ok(out)
    }

    /// Channel dropout (`torch.nn.functional.dropout2d`): in training, zeroes each whole
    /// `[H, W]` channel plane with probability `p` and scales the others by `1 / (1 - p)`; the
    /// identity otherwise. `seed: None` draws from the global generator.
    ///
    /// # Shapes
    /// - `self`: `[N, C, H, W]`; the mask is `[N, C, 1, 1]`
    /// - result: `[N, C, H, W]`
    pub fn dropout2d(&self, p: f64, training: bool, seed: Option<u64>) -> Result<Tensor> {
        let s = self.shape();
        if s.len() != 4 {
            return Err(Error::bad_shape("dropout2d", s, "expects a 4-D [N, C, H, W] input"));
        }
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::bad_shape("dropout2d", s, format!("probability {p} is outside [0, 1]")));
        }
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return self.mul(&self.zeros_like()?);
        }
        let seed = seed.unwrap_or_else(crate::rng::next_seed);
        let mask = Tensor::bernoulli(&[s[0], s[1], 1, 1], 1.0 - p, seed, self.dtype(), self.device())?;
        self.mul(&mask.mul_scalar(1.0 / (1.0 - p))?)
    }

    /// `softmax(q k^T * scale + mask) v` (`torch.nn.functional.scaled_dot_product_attention`,
    /// without dropout), with `self` as the queries. `scale` defaults to `1 / sqrt(E)`.
    ///
    /// `attn_mask` broadcasts to `[*, L, S]`: a bool mask keeps the positions where it is true
    /// (the others get `-inf` before the softmax); a float mask of the query's dtype is added.
    /// `is_causal` keeps key `j <= i` for query `i` (the top-left aligned lower triangle, as
    /// PyTorch) and cannot be combined with `attn_mask`. A query whose keys are all masked
    /// gets NaN, as in PyTorch's math kernel.
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
        scores.softmax(-1isize)?.matmul(value)
    }
}
