//! Scaled dot-product attention, a composite of matmul, masking and softmax, fused into one
//! custom op ([`Attention`]) where the device has a kernel for it.
//!
//! Dimension letters: N batch, H heads, L query length, S key length, E query/key width, Ev
//! value width.

use std::sync::Arc;

use crate::autograd::GradFn;
use crate::custom::CustomOp;
use crate::dtype::{Bool8, DType};
use crate::error::{Error, Result};
use crate::fused;
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
    /// computes them there. Without a mask, the whole of it is one kernel each way where the
    /// device has one ([`Attention`]); its result may then be a permuted view.
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
        if attn_mask.is_none() && !is_causal {
            if let Some(out) = fused_attention(self, key, value, scale)? {
                return Ok(out);
            }
        }
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

/// Unmasked attention over `[N, L, E]` or `[N, H, L, E]` operands of one shape of batch as one
/// [`Attention`] kernel, or `None` where the composite runs: no kernel on the device, f64,
/// batch dims that broadcast, an autocast region that would cast the operands first, or an
/// observer that wants the composite's primitives (export traces them).
fn fused_attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Result<Option<Tensor>> {
    let r = q.rank();
    let plain = matches!(q.dtype(), DType::F32 | DType::F16 | DType::BF16) && matches!(r, 3 | 4) && k.rank() == r && v.rank() == r;
    if !plain || k.shape()[..r - 2] != q.shape()[..r - 2] || v.shape()[..r - 2] != q.shape()[..r - 2] {
        return Ok(None);
    }
    // Asked without casting: the composite's products cast for themselves.
    // The composite's larger product: [*, L, E] x [*, E, S] or [*, L, S] x [*, S, Ev].
    let (rows, s_len) = ((q.numel() / q.shape()[r - 1].max(1)) as u64, k.shape()[r - 2] as u64);
    let ops = 2 * rows * s_len * q.shape()[r - 1].max(v.shape()[r - 1]) as u64;
    let casts = crate::autocast::casts(&[q, k, v], ops);
    if crate::observe::active() || casts {
        return Ok(None);
    }
    let heads = |t: &Tensor| if r == 3 { t.unsqueeze(1usize) } else { Ok(t.clone()) };
    let (q4, k4, v4) = (heads(q)?, heads(k)?, heads(v)?);
    let op = Attention { scale };
    let Some(outs) = fused::run(&op, &[&q4, &k4, &v4]) else { return Ok(None) };
    let mut outs = outs?.into_iter();
    let (Some(o), Some(p)) = (outs.next(), outs.next()) else {
        return Err(Error::Autograd("attention: the kernel must return the output and the probabilities".into()));
    };
    let o = o.recorded(&[&q4, &k4, &v4], move || GradFn::Custom { op: Arc::new(op), aux: vec![p] });
    // Stored [N, L, H, Ev], so merging the heads back is a view; seen as [N, H, L, Ev].
    let o = o.permute(&[0, 2, 1, 3])?;
    Ok(Some(if r == 3 { o.squeeze(1usize)? } else { o }))
}

/// The float type a composite below computes in: f32 for the low types, f64 stays.
fn wide(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Attention without a mask, `o = softmax(q k^T * scale) v`, in one kernel (PyTorch's
/// fused attention). Inputs (any strides, the last dim dense): `q` `[N, H, L, E]`, `k`
/// `[N, H, S, E]`, `v` `[N, H, S, Ev]`. Outputs: `o` stored `[N, L, H, Ev]` (the layout the
/// heads merge into, so `[N, H, L, Ev]` is a permuted view of it) and the probabilities `p`
/// `[N, H, L, S]`, which the backward reads. Scores and sums are f32 whatever the dtype; `o`
/// and `p` are rounded to it once.
#[derive(Clone, Copy, Debug)]
pub struct Attention {
    pub scale: f64,
}

impl CustomOp for Attention {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (q, v) = (inputs[0].shape(), inputs[2].shape());
        let s = inputs[1].shape()[2];
        let dtype = inputs[0].dtype();
        vec![(vec![q[0], q[2], q[1], v[3]], dtype), (vec![q[0], q[1], q[2], s], dtype)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let dtype = q.dtype();
        let scores = q.matmul(&k.transpose(-2isize, -1isize)?)?.to_dtype(wide(dtype))?.mul_scalar(self.scale)?;
        let p = scores.softmax(-1isize)?.to_dtype(dtype)?;
        let o = p.matmul(v)?.permute(&[0, 2, 1, 3])?.contiguous()?;
        Ok(vec![o, p])
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let args = [&inputs[0], &inputs[1], &inputs[2], grad, &outputs[1]];
        // Self-attention's gradients side by side in one buffer, where a kernel writes them so:
        // the heads of a packed projection then join with no copy.
        let (q, v) = (inputs[0].shape(), inputs[2].shape());
        let joined = match q == v {
            true => fused::run(&AttentionBackwardJoined { scale: self.scale }, &args).transpose()?,
            false => None,
        };
        let grads = match joined.and_then(|mut g| g.pop()) {
            Some(all) => (0..3).map(|i| all.select(2usize, i)).collect::<Result<Vec<_>>>()?,
            None => fused::run_or_composite(&AttentionBackward { scale: self.scale }, &args)?,
        };
        // Each stored [N, *, H, *]: the operands' [N, H, *, *] as a view.
        grads.into_iter().map(|g| g.permute(&[0, 2, 1, 3]).map(Some)).collect()
    }
}

/// The gradient of [`Attention`] from its probabilities `p`: with `dp = do v^T` and
/// `ds = p (dp - sum(p dp)) * scale` along the keys, `dq = ds k`, `dk = ds^T q`, `dv = p^T do`.
/// Inputs: `q`, `k`, `v` as [`Attention`]'s, `do` `[N, L, H, Ev]` (the output's gradient), `p`
/// `[N, H, L, S]`. Outputs, in `q`'s dtype: `dq` `[N, L, H, E]`, `dk` `[N, S, H, E]`, `dv` `[N, S,
/// H, Ev]`.
#[derive(Clone, Copy, Debug)]
pub struct AttentionBackward {
    pub scale: f64,
}

impl CustomOp for AttentionBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (q, k, v) = (inputs[0].shape(), inputs[1].shape(), inputs[2].shape());
        let dtype = inputs[0].dtype();
        vec![(vec![q[0], q[2], q[1], q[3]], dtype), (vec![k[0], k[2], k[1], k[3]], dtype), (vec![v[0], v[2], v[1], v[3]], dtype)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let dtype = inputs[0].dtype();
        let w = |t: &Tensor| t.to_dtype(wide(dtype));
        let (q, k, v) = (w(inputs[0])?, w(inputs[1])?, w(inputs[2])?);
        let d_o = w(inputs[3])?.permute(&[0, 2, 1, 3])?;
        let p = w(inputs[4])?;
        let dp = d_o.matmul(&v.transpose(-2isize, -1isize)?)?;
        let along = p.mul(&dp)?.sum(&[3], true)?;
        let ds = p.mul(&dp.sub(&along)?)?.mul_scalar(self.scale)?;
        let dq = ds.matmul(&k)?;
        let dk = ds.transpose(-2isize, -1isize)?.matmul(&q)?;
        let dv = p.transpose(-2isize, -1isize)?.matmul(&d_o)?;
        let stored = |g: Tensor| g.permute(&[0, 2, 1, 3])?.to_dtype(dtype)?.contiguous();
        Ok(vec![stored(dq)?, stored(dk)?, stored(dv)?])
    }
}

/// [`AttentionBackward`] where `q`, `k` and `v` are of one shape (self-attention), its three
/// results side by side in one output `[N, L, 3, H, E]`: the layout of the gradient of a packed
/// projection `[N, L, 3 H E]` that the heads were split from, so their join is a view.
#[derive(Clone, Copy, Debug)]
pub struct AttentionBackwardJoined {
    pub scale: f64,
}

impl CustomOp for AttentionBackwardJoined {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let q = inputs[0].shape();
        vec![(vec![q[0], q[2], 3, q[1], q[3]], inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let grads = AttentionBackward { scale: self.scale }.composite(inputs)?;
        Ok(vec![Tensor::stack(&grads.iter().collect::<Vec<_>>(), 2)?])
    }
}

crate::custom_kernel_name! {
    Attention => "attention",
    AttentionBackward => "attention_backward",
    AttentionBackwardJoined => "attention_backward_joined",
}
