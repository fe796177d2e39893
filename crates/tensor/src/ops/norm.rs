//! Normalization (layer, batch, group) and dropout (elementwise, channel), built from
//! primitives.
//!
//! Dimension letters: N batch, C channels, G groups.

use crate::autograd::{self, GradFn};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused::{fusion_enabled, try_fused, BatchNormOptions, FusedOp, LayerNormOptions};
use crate::layout::Layout;
use crate::ops::check_float;
use crate::tensor::Tensor;

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
        let dims: Vec<usize> = (self.rank() - normalized_dims..self.rank()).collect();
        let norm_shape = &self.shape()[self.rank() - normalized_dims..];
        for (name, p) in [("weight", weight), ("bias", bias)] {
            if p.is_some_and(|p| p.shape() != norm_shape) {
                let p = p.expect("checked is_some");
                return Err(Error::shape("layer_norm", self.shape(), p.shape(), format!("input and {name} disagree: the {name} must be {norm_shape:?}")));
            }
        }
        if let Some(out) = self.layer_norm_fused(norm_shape.iter().product(), weight, bias, eps)? {
            return Ok(out);
        }
        let centered = self.sub(&self.mean(&dims, true)?)?;
        let var = centered.square()?.mean(&dims, true)?;
        let mut out = centered.mul(&var.add_scalar(eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            out = out.mul(w)?;
        }
        if let Some(b) = bias {
            out = out.add(b)?;
        }
        Ok(out)
    }

    /// [`Tensor::layer_norm`] over rows of `width` as [`FusedOp::LayerNorm`], or `None` where the
    /// composite runs instead: fusion off, no kernel, empty rows, or parameters of another
    /// dtype or device than `self` (the composite reports those).
    fn layer_norm_fused(&self, width: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Option<Tensor>> {
        let params: Vec<&Tensor> = weight.into_iter().chain(bias).collect();
        if !fusion_enabled() || width == 0 || params.iter().any(|p| p.dtype() != self.dtype() || p.device() != self.device()) {
            return Ok(None);
        }
        let x = self.contiguous()?;
        let params = params.into_iter().map(Tensor::contiguous).collect::<Result<Vec<_>>>()?;
        let inputs: Vec<&Tensor> = std::iter::once(&x).chain(&params).collect();
        let options = LayerNormOptions { width, eps, weight: weight.is_some(), bias: bias.is_some() };
        let Some(outs) = try_fused(&FusedOp::LayerNorm(options), &inputs) else { return Ok(None) };
        let mut outs = outs?.into_iter();
        let y = outs.next().expect("counted by try_fused");
        let rows = [x.numel() / width];
        let mut stat = || Tensor::from_parts(outs.next().expect("counted by try_fused"), Layout::contiguous(&rows), x.dtype(), x.device(), None);
        let (mean, rstd) = (stat(), stat());
        Ok(Some(Tensor::from_op(y, x.shape(), x.dtype(), x.device(), &inputs, || GradFn::LayerNorm { options, mean, rstd })))
    }

    /// The backward rule of the fused [`Tensor::layer_norm`]: `(dx, dweight, dbias)` (the last
    /// two where given), from the saved `mean` and `rstd` `[R]`, itself fused where the device
    /// can ([`FusedOp::LayerNormBackward`]).
    pub(crate) fn layer_norm_backward(
        dy: &Tensor,
        x: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        options: LayerNormOptions,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let dy = dy.contiguous()?;
        let d = options.width;
        let inputs: Vec<&Tensor> = [x, &dy, mean, rstd].into_iter().chain(weight).collect();
        if let Some(outs) = try_fused(&FusedOp::LayerNormBackward(options), &inputs) {
            let mut outs = outs?.into_iter();
            let mut next =
                |shape: &[usize]| Tensor::from_parts(outs.next().expect("counted by try_fused"), Layout::contiguous(shape), x.dtype(), x.device(), None);
            let dx = next(x.shape());
            let dweight = options.weight.then(|| next(&[d]));
            let dbias = options.bias.then(|| next(&[d]));
            return Ok((dx, dweight, dbias));
        }
        let r = mean.numel();
        let (x2, dy2) = (x.reshape(&[r, d])?, dy.reshape(&[r, d])?);
        let rstd = rstd.reshape(&[r, 1])?;
        let xhat = x2.sub(&mean.reshape(&[r, 1])?)?.mul(&rstd)?;
        let g = match weight {
            Some(w) => dy2.mul(&w.reshape(&[1, d])?)?,
            None => dy2.clone(),
        };
        let (mean_g, mean_gx) = (g.mean(&[1], true)?, g.mul(&xhat)?.mean(&[1], true)?);
        let dx = g.sub(&mean_g)?.sub(&xhat.mul(&mean_gx)?)?.mul(&rstd)?.reshape(x.shape())?;
        let dweight = if options.weight { Some(dy2.mul(&xhat)?.sum(&[0], false)?) } else { None };
        let dbias = if options.bias { Some(dy2.sum(&[0], false)?) } else { None };
        Ok((dx, dweight, dbias))
    }

    /// Batch normalization of `[N, C, ...]` over every axis but 1
    /// (`torch.nn.functional.batch_norm`). In training, normalizes with the batch statistics and,
    /// when given, updates the running ones in place with `momentum` (running variance takes the
    /// unbiased batch variance, as PyTorch). In eval, uses the running statistics. Training runs
    /// as fused kernels where the device has them ([`FusedOp::BatchNormTrain`], its gradient
    /// [`FusedOp::BatchNormBackward`]); the primitives below are their oracle.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        check_float("batch_norm", self)?;
        if self.rank() < 2 {
            return Err(Error::bad_shape("batch_norm", self.shape(), "expects [N, C, ...]"));
        }
        let c = self.shape()[1];
        let mut bshape = vec![1; self.rank()];
        bshape[1] = c;
        for (name, p) in [("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)] {
            if let Some(p) = p {
                if p.shape() != [c] {
                    return Err(Error::shape("batch_norm", self.shape(), p.shape(), format!("input and {name} disagree: {name} must be [C] = [{c}]")));
                }
            }
        }
        let dims: Vec<usize> = (0..self.rank()).filter(|&d| d != 1).collect();
        let n: usize = dims.iter().map(|&d| self.shape()[d]).product();
        if training {
            if n <= 1 {
                return Err(Error::bad_shape("batch_norm", self.shape(), "training needs more than one value per channel"));
            }
            if let Some(out) = self.batch_norm_fused(running_mean.zip(running_var), weight.zip(bias), weight.is_some() != bias.is_some(), momentum, eps)? {
                return Ok(out);
            }
        }
        // Under autocast a low input keeps its type, as `torch.autocast` leaves batch norm to
        // cuDNN's kernel of f16 activations and f32 parameters: the fused kernel above where
        // the device has that variant, else the composite in f32, rounded back.
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.batch_norm(running_mean, running_var, weight, bias, training, momentum, eps)?.to_dtype(self.dtype());
        }
        let (mean, var) = if training {
            let mean = self.mean(&dims, true)?;
            let var = self.sub(&mean)?.square()?.mean(&dims, true)?;
            if let (Some(rm), Some(rv)) = (running_mean, running_var) {
                autograd::no_grad(|| -> Result<()> {
                    let unbiased = var.reshape(&[c])?.mul_scalar(n as f64 / (n - 1) as f64)?;
                    rm.assign(&rm.mul_scalar(1.0 - momentum)?.add(&mean.reshape(&[c])?.mul_scalar(momentum)?)?)?;
                    rv.assign(&rv.mul_scalar(1.0 - momentum)?.add(&unbiased.mul_scalar(momentum)?)?)
                })?;
            }
            (mean, var)
        } else {
            match (running_mean, running_var) {
                (Some(m), Some(v)) => (m.reshape(&bshape)?, v.reshape(&bshape)?),
                _ => return Err(Error::bad_shape("batch_norm", self.shape(), "eval mode needs running_mean and running_var")),
            }
        };
        let mut out = self.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            out = out.mul(&w.reshape(&bshape)?)?;
        }
        if let Some(b) = bias {
            out = out.add(&b.reshape(&bshape)?)?;
        }
        Ok(out)
    }

    /// Training-mode [`Tensor::batch_norm`] as [`FusedOp::BatchNormTrain`], or `None` where the
    /// composite runs instead: fusion off, no kernel, a lone weight or bias (`lopsided`), or
    /// parameters of another dtype or device than `self` (the composite reports those). Under
    /// autocast a low `self` may meet f32 parameters: then the statistics are f32 too.
    fn batch_norm_fused(
        &self,
        running: Option<(&Tensor, &Tensor)>,
        affine: Option<(&Tensor, &Tensor)>,
        lopsided: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Option<Tensor>> {
        if !fusion_enabled() || lopsided {
            return Ok(None);
        }
        let params: Vec<&Tensor> = affine.into_iter().chain(running).flat_map(|(a, b)| [a, b]).collect();
        let low = crate::autocast::autocast_dtype().is_some() && matches!(self.dtype(), DType::F16 | DType::BF16);
        let stats = match params.first() {
            Some(p) if low && p.dtype() == DType::F32 => DType::F32,
            _ if low => return Ok(None),
            _ => self.dtype(),
        };
        if params.iter().any(|p| p.dtype() != stats || p.device() != self.device()) {
            return Ok(None);
        }
        let x = self.contiguous()?;
        let params = params.into_iter().map(Tensor::contiguous).collect::<Result<Vec<_>>>()?;
        let inputs: Vec<&Tensor> = std::iter::once(&x).chain(&params).collect();
        let op = FusedOp::BatchNormTrain(BatchNormOptions { eps, momentum, affine: affine.is_some(), running: running.is_some() });
        let Some(outs) = try_fused(&op, &inputs) else { return Ok(None) };
        let mut outs = outs?.into_iter();
        let y = outs.next().expect("counted by try_fused");
        let c = [x.shape()[1]];
        let mut stat = || Tensor::from_parts(outs.next().expect("counted by try_fused"), Layout::contiguous(&c), stats, x.device(), None);
        let (mean, invstd) = (stat(), stat());
        if let Some((rm, rv)) = running {
            rm.assign(&stat())?;
            rv.assign(&stat())?;
        }
        let recorded = &inputs[..if affine.is_some() { 3 } else { 1 }];
        Ok(Some(Tensor::from_op(y, x.shape(), x.dtype(), x.device(), recorded, || GradFn::BatchNorm { mean, invstd })))
    }

    /// The backward rule of the fused training [`Tensor::batch_norm`]: `(dx, dweight, dbias)`
    /// (the last two with `weight`), from the saved `mean` and `invstd` `[C]`, itself fused where
    /// the device can ([`FusedOp::BatchNormBackward`]). A low `x` with f32 statistics (autocast's
    /// batch norm) gives `dx` in `x`'s type and the parameters' gradients in f32.
    pub(crate) fn batch_norm_backward(
        dy: &Tensor,
        x: &Tensor,
        mean: &Tensor,
        invstd: &Tensor,
        weight: Option<&Tensor>,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let dy = dy.to_dtype(x.dtype())?.contiguous()?;
        let c = x.shape()[1];
        let affine = weight.is_some();
        let op = FusedOp::BatchNormBackward(BatchNormOptions { eps: 0.0, momentum: 0.0, affine, running: false });
        let inputs: Vec<&Tensor> = [x, &dy, mean, invstd].into_iter().chain(weight).collect();
        if let Some(outs) = try_fused(&op, &inputs) {
            let mut outs = outs?.into_iter();
            let mut next =
                |shape: &[usize], dtype| Tensor::from_parts(outs.next().expect("counted by try_fused"), Layout::contiguous(shape), dtype, x.device(), None);
            let dx = next(x.shape(), x.dtype());
            return Ok(if affine { (dx, Some(next(&[c], mean.dtype())), Some(next(&[c], mean.dtype()))) } else { (dx, None, None) });
        }
        if x.dtype() != mean.dtype() {
            let wide = mean.dtype();
            let (dx, dweight, dbias) = Tensor::batch_norm_backward(&dy.to_dtype(wide)?, &x.to_dtype(wide)?, mean, invstd, weight)?;
            return Ok((dx.to_dtype(x.dtype())?, dweight, dbias));
        }
        let mut bshape = vec![1; x.rank()];
        bshape[1] = c;
        let dims: Vec<usize> = (0..x.rank()).filter(|&d| d != 1).collect();
        let inv_m = c as f64 / x.numel() as f64;
        let invstd = invstd.reshape(&bshape)?;
        let xhat = x.sub(&mean.reshape(&bshape)?)?.mul(&invstd)?;
        let dbias = dy.sum(&dims, true)?;
        let dweight = dy.mul(&xhat)?.sum(&dims, true)?;
        let mut dx = dy.sub(&dbias.mul_scalar(inv_m)?)?.sub(&xhat.mul(&dweight.mul_scalar(inv_m)?)?)?.mul(&invstd)?;
        if let Some(w) = weight {
            dx = dx.mul(&w.reshape(&bshape)?)?;
        }
        Ok(if affine { (dx, Some(dweight.reshape(&[c])?), Some(dbias.reshape(&[c])?)) } else { (dx, None, None) })
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
