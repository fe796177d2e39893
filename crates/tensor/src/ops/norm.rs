//! Layer and group normalization, and dropout (elementwise, channel), built from primitives;
//! layer normalization and its rule are custom ops ([`LayerNorm`], [`LayerNormLow`],
//! [`AddLayerNorm`], [`LayerNormBackward`], [`LayerNormBackwardInto`]),
//! one kernel each where the device has one. (Batch normalization is `batch_norm.rs`.)
//!
//! Dimension letters: N batch, C channels, G groups, R rows and D their width (layer norm).

use crate::autograd::GradFn;
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused::{self, fusion_enabled, LayerNormOptions};
use crate::ops::check_float;
use crate::tensor::Tensor;

/// A layer norm's `(dx, dweight, dbias)`, the last two where it has those parameters.
pub(crate) type LayerNormGrads = (Tensor, Option<Tensor>, Option<Tensor>);

impl Tensor {
    /// Layer normalization over the last `normalized_dims` axes, with optional elementwise
    /// `weight` and `bias` of those axes' shape (`torch.nn.functional.layer_norm`).
    pub fn layer_norm(&self, normalized_dims: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.layer_norm(normalized_dims, weight, bias, eps);
        }
        check_float("layer_norm", self)?;
        if normalized_dims == 0 || normalized_dims > self.rank() {
            return Err(Error::bad_shape("layer_norm", self.shape(), format!("cannot normalize over the last {normalized_dims} dims")));
        }
        let norm_shape = &self.shape()[self.rank() - normalized_dims..];
        for (name, p) in [("weight", weight), ("bias", bias)] {
            if p.is_some_and(|p| p.shape() != norm_shape) {
                let p = p.expect("checked is_some");
                return Err(Error::shape("layer_norm", self.shape(), p.shape(), format!("input and {name} disagree: the {name} must be {norm_shape:?}")));
            }
        }
        let options = LayerNormOptions { width: norm_shape.iter().product(), eps, weight: weight.is_some(), bias: bias.is_some() };
        if let Some(out) = self.layer_norm_fused(options, weight, bias)? {
            return Ok(out);
        }
        let inputs: Vec<&Tensor> = [self].into_iter().chain(weight).chain(bias).collect();
        Ok(LayerNorm(options).composite(&inputs)?.remove(0))
    }

    /// [`Tensor::layer_norm`] as the kernel of [`LayerNorm`], or `None` where the composite
    /// runs instead: fusion off, no kernel, empty rows, or parameters of another dtype or
    /// device than `self` (the composite reports those).
    fn layer_norm_fused(&self, options: LayerNormOptions, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<Option<Tensor>> {
        let params: Vec<&Tensor> = weight.into_iter().chain(bias).collect();
        if !fusion_enabled() || options.width == 0 || params.iter().any(|p| p.dtype() != self.dtype() || p.device() != self.device()) {
            return Ok(None);
        }
        let x = self.contiguous()?;
        let params = params.into_iter().map(Tensor::contiguous).collect::<Result<Vec<_>>>()?;
        let inputs: Vec<&Tensor> = std::iter::once(&x).chain(&params).collect();
        // Under autocast, with the output's cast to the low type too where that is wanted.
        let low = crate::autocast::layer_norm_low(self, weight);
        let with_low = low.and_then(|low| fused::run(&LayerNormLow { options, low }, &inputs));
        let Some(outs) = with_low.or_else(|| fused::run(&LayerNorm(options), &inputs)) else { return Ok(None) };
        let mut outs = outs?.into_iter();
        let (y, mean, rstd) = (outs.next().expect("counted by fused::run"), outs.next().expect("three outputs"), outs.next().expect("three outputs"));
        let y = y.recorded(&inputs, || GradFn::LayerNorm { options, mean, rstd });
        if let (Some(copy), Some(weight)) = (outs.next(), weight) {
            crate::autocast::keep_low_copy(&y, weight, copy);
        }
        Ok(Some(y))
    }

    /// `self + other` and that sum's layer normalization over its last `normalized_dims` axes:
    /// `(s, s.layer_norm(..))`, a residual stream's add and the next block's norm. One kernel
    /// where the device has one ([`AddLayerNorm`]), which normalizes the sum as it writes it
    /// rather than reading it back. The graph records the add and the layer norm as the two ops
    /// would, so the gradients are theirs.
    pub fn add_layer_norm(&self, other: &Tensor, normalized_dims: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<(Tensor, Tensor)> {
        if let Some(out) = self.add_layer_norm_fused(other, normalized_dims, weight, bias, eps)? {
            return Ok(out);
        }
        let s = self.add(other)?;
        let y = s.layer_norm(normalized_dims, weight, bias, eps)?;
        Ok((s, y))
    }

    /// [`Tensor::add_layer_norm`] as the kernel of [`AddLayerNorm`], or `None` where the two
    /// ops run instead: an f32 `self` and an f32 `other` (or an f16 or bf16 one under autocast,
    /// which adds it in f32) of one shape, contiguous, with f32 parameters of the normalized
    /// shape; anything else is left to the ops, which report what is wrong.
    fn add_layer_norm_fused(
        &self,
        other: &Tensor,
        normalized_dims: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let wide = match (self.dtype(), other.dtype()) {
            (DType::F32, DType::F32) => false,
            (DType::F32, DType::F16 | DType::BF16) if crate::autocast::autocast_dtype().is_some() => true,
            _ => return Ok(None),
        };
        let rank = self.rank();
        let params: Vec<&Tensor> = weight.into_iter().chain(bias).collect();
        let shaped = normalized_dims > 0 && normalized_dims <= rank && self.shape() == other.shape();
        // An observer (anomaly detection, export) wants the ops one by one.
        if !shaped || !fusion_enabled() || crate::observe::active() || !self.is_contiguous() || !other.is_contiguous() || self.device() != other.device() {
            return Ok(None);
        }
        let norm_shape = &self.shape()[rank - normalized_dims..];
        if params.iter().any(|p| p.dtype() != DType::F32 || p.device() != self.device() || p.shape() != norm_shape) {
            return Ok(None);
        }
        let options = LayerNormOptions { width: norm_shape.iter().product(), eps, weight: weight.is_some(), bias: bias.is_some() };
        if options.width == 0 {
            return Ok(None);
        }
        let params = params.into_iter().map(Tensor::contiguous).collect::<Result<Vec<_>>>()?;
        let inputs: Vec<&Tensor> = std::iter::once(self).chain(&params).chain([other]).collect();
        // With the output's low copy where autocast wants one and the device writes it.
        let want = crate::autocast::layer_norm_low(self, weight);
        let (outs, low) = match want.and_then(|low| fused::run(&AddLayerNorm { options, low: Some(low) }, &inputs)) {
            Some(outs) => (outs, want),
            None => match fused::run(&AddLayerNorm { options, low: None }, &inputs) {
                Some(outs) => (outs, None),
                None => return Ok(None),
            },
        };
        let mut outs = outs?.into_iter();
        let mut next = || outs.next().expect("counted by fused::run");
        let (y, mean, rstd) = (next(), next(), next());
        let copy = low.map(|_| next());
        let sum = next();
        // As `Tensor::add` records it: autocast's wide sum as an add of the low operand's cast.
        let sum = if wide {
            let from = other.dtype();
            let cast = sum.recorded(&[other], || GradFn::Cast { from });
            sum.recorded(&[self, &cast], || GradFn::Binary(crate::backend::BinaryOp::Add))
        } else {
            sum.recorded(&[self, other], || GradFn::Binary(crate::backend::BinaryOp::Add))
        };
        let norm_inputs: Vec<&Tensor> = std::iter::once(&sum).chain(&params).collect();
        let y = y.recorded(&norm_inputs, || GradFn::LayerNorm { options, mean, rstd });
        if let (Some(copy), Some(weight)) = (copy, weight) {
            crate::autocast::keep_low_copy(&y, weight, copy);
        }
        Ok(Some((sum, y)))
    }

    /// The backward rule of the fused [`Tensor::layer_norm`]: `(dx, dweight, dbias)` (the last
    /// two where given), from the saved `mean` and `rstd` `[R]`, itself fused where the device
    /// can ([`LayerNormBackward`]). With `into`, `(acc, low)`: `dx` summed into `acc`, the
    /// gradient of `x` gathered so far (a residual stream's, whose other branch came first),
    /// by the backward's own kernel where the device has one ([`LayerNormBackwardInto`]), else
    /// the backward then the add; and with `low`, that sum cast to `low` too (the second result).
    pub(crate) fn layer_norm_backward(
        dy: &Tensor,
        x: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        options: LayerNormOptions,
        into: Option<(&Tensor, Option<DType>)>,
    ) -> Result<(LayerNormGrads, Option<Tensor>)> {
        let dy = dy.contiguous()?;
        let acc = into.map(|(acc, _)| acc.contiguous()).transpose()?;
        let inputs: Vec<&Tensor> = [x, &dy, mean, rstd].into_iter().chain(weight).chain(acc.as_ref()).collect();
        let low = into.and_then(|(_, low)| low);
        let outs = match into {
            Some(_) => fused::run_or_composite(&LayerNormBackwardInto { options, low }, &inputs)?,
            None => fused::run_or_composite(&LayerNormBackward(options), &inputs)?,
        };
        let mut outs = outs.into_iter();
        let dx = outs.next().expect("dx first");
        let dweight = if options.weight { outs.next() } else { None };
        let dbias = if options.bias { outs.next() } else { None };
        let dx_low = if low.is_some() { outs.next() } else { None };
        Ok(((dx, dweight, dbias), dx_low))
    }

    /// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)` in
    /// training; the identity otherwise. `seed: None` draws from the global generator.
    pub fn dropout(&self, p: f64, training: bool, seed: Option<u64>) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::bad_shape("dropout", self.shape(), format!("probability {p} is outside [0, 1]")));
        }
        if !training || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return self.mul(&self.zeros_like()?);
        }
        let seed = seed.unwrap_or_else(crate::rng::next_seed);
        let mask = Tensor::bernoulli(self.shape(), 1.0 - p, seed, self.dtype(), self.device())?;
        self.mul(&mask.mul_scalar(1.0 / (1.0 - p))?)
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
}

/// The trailing axes of `shape` a layer norm of rows of `width` normalizes: the fewest whose
/// sizes multiply to `width` (axes of size 1 beyond them hold the same elements either way).
fn row_axes(shape: &[usize], width: usize) -> Vec<usize> {
    let mut product = 1;
    let mut first = shape.len();
    while first > 0 && product != width {
        first -= 1;
        product *= shape[first];
    }
    (first..shape.len()).collect()
}

/// Layer normalization ([`Tensor::layer_norm`]) of `x` viewed as `[R, D]`, `D = width` the
/// product of the normalized axes, row by row:
///
/// ```text
/// mean = sum(x[r, :]) / D;  var = sum((x[r, :] - mean)^2) / D;  rstd = 1 / sqrt(var + eps)
/// y = (x - mean) rstd weight + bias
/// ```
///
/// Statistics are accumulated in f32 or wider. Inputs (contiguous): `x`, then `weight` (when
/// `weight`), then `bias` (when `bias`), each `D` elements. Outputs: `y` shaped like `x`, then
/// `mean` and `rstd` `[R]` (what the backward, [`LayerNormBackward`], reads).
#[derive(Clone, Copy, Debug)]
pub struct LayerNorm(pub LayerNormOptions);

impl CustomOp for LayerNorm {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let x = inputs[0];
        let rows = vec![x.numel() / self.0.width.max(1)];
        vec![(x.shape().to_vec(), x.dtype()), (rows.clone(), x.dtype()), (rows, x.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0];
        let dims = row_axes(x.shape(), self.0.width);
        let mean = x.mean(&dims, true)?;
        let centered = x.sub(&mean)?;
        let var = centered.square()?.mean(&dims, true)?;
        let rstd = var.add_scalar(self.0.eps)?.rsqrt()?;
        let mut out = centered.mul(&rstd)?;
        let mut params = inputs[1..].iter();
        if self.0.weight {
            out = out.mul(params.next().expect("a weight"))?;
        }
        if self.0.bias {
            out = out.add(params.next().expect("a bias"))?;
        }
        let rows = [x.numel() / self.0.width.max(1)];
        Ok(vec![out, mean.reshape(&rows)?, rstd.reshape(&rows)?])
    }
}

/// The gradient of [`LayerNorm`] from its saved statistics, with `xhat = (x - mean) rstd` and
/// `g = dy weight` (`g = dy` without a weight):
///
/// ```text
/// dx = rstd (g - sum(g) / D - xhat sum(g xhat) / D)      (sums along the row)
/// dweight = sum over rows of dy xhat;  dbias = sum over rows of dy
/// ```
///
/// Inputs (contiguous): `x`, `dy` (one shape), `mean`, `rstd` `[R]`, then `weight` (when
/// `weight`). Outputs: `dx`, then `dweight` (when `weight`), then `dbias` (when `bias`), each
/// `D` elements. `eps` is not read.
#[derive(Clone, Copy, Debug)]
pub struct LayerNormBackward(pub LayerNormOptions);

impl CustomOp for LayerNormBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let x = inputs[0];
        let params = self.0.weight as usize + self.0.bias as usize;
        std::iter::once((x.shape().to_vec(), x.dtype())).chain((0..params).map(|_| (vec![self.0.width], x.dtype()))).collect()
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (x, dy, mean, rstd, weight) = (inputs[0], inputs[1], inputs[2], inputs[3], inputs.get(4));
        let (r, d) = (mean.numel(), self.0.width);
        let (x2, dy2) = (x.reshape(&[r, d])?, dy.reshape(&[r, d])?);
        let rstd = rstd.reshape(&[r, 1])?;
        let xhat = x2.sub(&mean.reshape(&[r, 1])?)?.mul(&rstd)?;
        let g = match weight {
            Some(w) => dy2.mul(&w.reshape(&[1, d])?)?,
            None => dy2.clone(),
        };
        let (mean_g, mean_gx) = (g.mean(&[1], true)?, g.mul(&xhat)?.mean(&[1], true)?);
        let mut outs = vec![g.sub(&mean_g)?.sub(&xhat.mul(&mean_gx)?)?.mul(&rstd)?.reshape(x.shape())?];
        if self.0.weight {
            outs.push(dy2.mul(&xhat)?.sum(&[0], false)?);
        }
        if self.0.bias {
            outs.push(dy2.sum(&[0], false)?);
        }
        Ok(outs)
    }
}

/// [`LayerNormBackward`] with its `dx` summed into a gradient of `x` already gathered: one
/// more input, last, `acc` (shaped like `x`), and `dx` is `acc + dx` (the backward's `dx`
/// rounded to the dtype, then the add's one rounding, as the two ops compute it). With `low`,
/// one more output, last: that `dx` cast to `low` (what the gradient of autocast's low operand
/// of the residual add that made `x` is).
#[derive(Clone, Copy, Debug)]
pub struct LayerNormBackwardInto {
    pub options: LayerNormOptions,
    pub low: Option<DType>,
}

impl CustomOp for LayerNormBackwardInto {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let mut outs = LayerNormBackward(self.options).outputs(inputs);
        outs.extend(self.low.map(|low| (inputs[0].shape().to_vec(), low)));
        outs
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (acc, rest) = inputs.split_last().ok_or_else(|| Error::Autograd("layer_norm_backward_into: no inputs".into()))?;
        let mut outs = fused::run_or_composite(&LayerNormBackward(self.options), rest)?;
        outs[0] = acc.add(&outs[0])?;
        if let Some(low) = self.low {
            let cast = outs[0].to_dtype(low)?;
            outs.push(cast);
        }
        Ok(outs)
    }
}

/// [`LayerNorm`] with `y` also written cast to `low`, a fourth output (what autocast's cast
/// of `y` for a low-type product would compute): inputs as [`LayerNorm`]'s.
#[derive(Clone, Copy, Debug)]
pub struct LayerNormLow {
    pub options: LayerNormOptions,
    pub low: DType,
}

impl CustomOp for LayerNormLow {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let mut outs = LayerNorm(self.options).outputs(inputs);
        outs.push((inputs[0].shape().to_vec(), self.low));
        outs
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let mut outs = fused::run_or_composite(&LayerNorm(self.options), inputs)?;
        let cast = outs[0].to_dtype(self.low)?;
        outs.push(cast);
        Ok(outs)
    }
}

/// A residual add and the layer norm of the sum ([`Tensor::add_layer_norm`]): `s = a + b`
/// (`b` widened to `a`'s type first, as autocast's add of an f32 tensor and an f16 or bf16
/// one computes it, one rounding), then [`LayerNorm`] of `s`, or [`LayerNormLow`] with `low`. Inputs: the
/// layer norm's (`a`, then its weight and bias where `options` has them), then `b`, shaped
/// like `a`. Outputs: the layer norm's (`y`, `mean`, `rstd`, and `y`'s copy in `low` where
/// given), then `s`.
#[derive(Clone, Copy, Debug)]
pub struct AddLayerNorm {
    pub options: LayerNormOptions,
    pub low: Option<DType>,
}

impl CustomOp for AddLayerNorm {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let a = inputs[0];
        let mut outs = match self.low {
            Some(low) => LayerNormLow { options: self.options, low }.outputs(inputs),
            None => LayerNorm(self.options).outputs(inputs),
        };
        outs.push((a.shape().to_vec(), a.dtype()));
        outs
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (b, norm_inputs) = inputs.split_last().ok_or_else(|| Error::Autograd("add_layer_norm: no inputs".into()))?;
        let a = norm_inputs[0];
        let s = a.add(&b.to_dtype(a.dtype())?)?;
        let inputs: Vec<&Tensor> = std::iter::once(&s).chain(norm_inputs[1..].iter().copied()).collect();
        let mut outs = match self.low {
            Some(low) => fused::run_or_composite(&LayerNormLow { options: self.options, low }, &inputs)?,
            None => fused::run_or_composite(&LayerNorm(self.options), &inputs)?,
        };
        outs.push(s);
        Ok(outs)
    }
}

crate::custom_kernel_name! {
    AddLayerNorm => "add_layer_norm",
    LayerNorm => "layer_norm",
    LayerNormLow => "layer_norm_low",
    LayerNormBackward => "layer_norm_backward",
    LayerNormBackwardInto => "layer_norm_backward_into",
}
