//! Batch normalization, `torch.nn.functional.batch_norm`: in training the custom op
//! [`BatchNormTrain`] (one or two kernels where the device has them, its gradient too,
//! [`BatchNormBackward`]) over a composite of primitives; in eval, primitives. A ReLU that
//! follows it can run inside the same kernels ([`Tensor::batch_norm_relu`]).
//!
//! Dimension letters: N batch, C channels, M = N times the spatial size (values per channel).

use crate::autograd::{self, GradFn};
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused::{self, fusion_enabled, BatchNormOptions};
use crate::ops::check_float;
use crate::tensor::Tensor;

impl Tensor {
    /// Batch normalization of `[N, C, ...]` over every axis but 1
    /// (`torch.nn.functional.batch_norm`). In training, normalizes with the batch statistics and,
    /// when given, updates the running ones in place with `momentum` (running variance takes the
    /// unbiased batch variance, as PyTorch). In eval, uses the running statistics. Training runs
    /// as fused kernels where the device has them ([`BatchNormTrain`], its gradient
    /// [`BatchNormBackward`]); the primitives of their composites are their oracle.
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
        self.batch_norm_then(running_mean, running_var, weight, bias, training, momentum, eps, false, None)
    }

    /// [`Tensor::batch_norm`] followed by [`Tensor::relu`] (a convolutional block's
    /// `F.relu(bn(x))`), the same values and gradients; in training the ReLU runs inside the
    /// fused kernels where the device has them, which saves the activation's two extra passes
    /// over memory each way.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm_relu(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        self.batch_norm_then(running_mean, running_var, weight, bias, training, momentum, eps, true, None)
    }

    /// [`Tensor::batch_norm`] (or, where `relu`, [`Tensor::batch_norm_relu`]) that in training
    /// also adds one to `num_batches_tracked`, the batch count `torch.nn.BatchNorm2d` keeps
    /// beside its running statistics (an I64 `[]`, assigned in place): inside the fused kernel
    /// where the device has it, which saves the count its own dispatch every layer and step.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm_tracked(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        num_batches_tracked: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
        relu: bool,
    ) -> Result<Tensor> {
        self.batch_norm_then(running_mean, running_var, weight, bias, training, momentum, eps, relu, num_batches_tracked.filter(|_| training))
    }

    /// [`Tensor::batch_norm`], then a ReLU where `relu`, adding one to `counter` (in training).
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_then(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
        relu: bool,
        counter: Option<&Tensor>,
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
        let running = running_mean.zip(running_var);
        if training {
            if n <= 1 {
                return Err(Error::bad_shape("batch_norm", self.shape(), "training needs more than one value per channel"));
            }
            if let Some((out, counted)) = self.batch_norm_fused(running, weight.zip(bias), weight.is_some() != bias.is_some(), momentum, eps, relu, counter)? {
                if !counted {
                    count_batch(counter)?;
                }
                return Ok(out);
            }
        }
        if counter.is_some() {
            let out = self.batch_norm_then(running_mean, running_var, weight, bias, training, momentum, eps, relu, None)?;
            count_batch(counter)?;
            return Ok(out);
        }
        if relu {
            return self.batch_norm_then(running_mean, running_var, weight, bias, training, momentum, eps, false, None)?.relu();
        }
        // Under autocast a low input keeps its type, as `torch.autocast` leaves batch norm to
        // cuDNN's kernel of f16 activations and f32 parameters: the fused kernel above where
        // the device has that variant, else the composite in f32, rounded back.
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.batch_norm(running_mean, running_var, weight, bias, training, momentum, eps)?.to_dtype(self.dtype());
        }
        if training {
            let (y, _, _, new_running) = train_composite(self, running, weight, bias, momentum, eps)?;
            if let (Some((rm, rv)), Some((new_mean, new_var))) = (running, new_running) {
                rm.assign(&new_mean)?;
                rv.assign(&new_var)?;
            }
            return Ok(y);
        }
        let (mean, var) = match running {
            Some((m, v)) => (m.reshape(&bshape)?, v.reshape(&bshape)?),
            None => return Err(Error::bad_shape("batch_norm", self.shape(), "eval mode needs running_mean and running_var")),
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

    /// Training-mode [`Tensor::batch_norm`] (with its ReLU where `relu`) as the kernel of
    /// [`BatchNormTrain`], or `None` where the composite runs instead: fusion off, no kernel, a
    /// lone weight or bias (`lopsided`), or parameters of another dtype or device than `self`
    /// (the composite reports those). Under autocast a low `self` may meet f32 parameters: then
    /// the statistics are f32 too. Beside the output, whether the kernel also counted the
    /// batch in `counter` (an I64 `[]` beside running statistics, where the device's kernel
    /// takes one); the caller counts it otherwise.
    #[allow(clippy::too_many_arguments)]
    fn batch_norm_fused(
        &self,
        running: Option<(&Tensor, &Tensor)>,
        affine: Option<(&Tensor, &Tensor)>,
        lopsided: bool,
        momentum: f64,
        eps: f64,
        relu: bool,
        counter: Option<&Tensor>,
    ) -> Result<Option<(Tensor, bool)>> {
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
        let mut inputs: Vec<&Tensor> = std::iter::once(&x).chain(&params).collect();
        let mut opts = BatchNormOptions { eps, momentum, affine: affine.is_some(), running: running.is_some(), relu, count: false };
        // The count rides along only as the buffer it will replace: an I64 `[]` of this device.
        let counter = counter.filter(|n| running.is_some() && n.dtype() == DType::I64 && n.shape().is_empty() && n.device() == self.device());
        let mut outs = None;
        if let Some(n) = counter {
            inputs.push(n);
            outs = fused::run(&BatchNormTrain(BatchNormOptions { count: true, ..opts }), &inputs);
            opts.count = outs.is_some();
            inputs.pop();
        }
        let Some(outs) = outs.or_else(|| fused::run(&BatchNormTrain(opts), &inputs)) else { return Ok(None) };
        let mut outs = outs?.into_iter();
        let mut next = || outs.next().expect("counted by fused::run");
        let (y, mean, invstd) = (next(), next(), next());
        if let Some((rm, rv)) = running {
            rm.assign(&next())?;
            rv.assign(&next())?;
        }
        if let (true, Some(n)) = (opts.count, counter) {
            n.assign(&next())?;
        }
        let recorded = &inputs[..if affine.is_some() { 3 } else { 1 }];
        Ok(Some((y.recorded(recorded, || GradFn::BatchNorm { mean, invstd, relu }), opts.count)))
    }

    /// The backward rule of the fused training [`Tensor::batch_norm`]: `(dx, dweight, dbias)`
    /// (the last two with `affine`, the weight and the bias), from the saved `mean` and `invstd`
    /// `[C]`, itself fused where the device can ([`BatchNormBackward`]); with `relu`, of
    /// [`Tensor::batch_norm_relu`]. A low `x` with f32 statistics (autocast's batch norm) gives
    /// `dx` in `x`'s type and the parameters' gradients in f32.
    pub(crate) fn batch_norm_backward(
        dy: &Tensor,
        x: &Tensor,
        mean: &Tensor,
        invstd: &Tensor,
        affine: Option<(&Tensor, &Tensor)>,
        relu: bool,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let dy = dy.to_dtype(x.dtype())?.contiguous()?;
        let op = BatchNormBackward(BatchNormOptions { eps: 0.0, momentum: 0.0, affine: affine.is_some(), running: false, relu, count: false });
        let (weight, bias) = (affine.map(|a| a.0), affine.filter(|_| relu).map(|a| a.1));
        let inputs: Vec<&Tensor> = [x, &dy, mean, invstd].into_iter().chain(weight).chain(bias).collect();
        let outs = match fused::run(&op, &inputs) {
            Some(outs) => outs?,
            // A device without the mixed kernel may have the f32 one.
            None if x.dtype() != mean.dtype() => {
                let wide = mean.dtype();
                let (dx, dweight, dbias) = Tensor::batch_norm_backward(&dy.to_dtype(wide)?, &x.to_dtype(wide)?, mean, invstd, affine, relu)?;
                return Ok((dx.to_dtype(x.dtype())?, dweight, dbias));
            }
            None => op.composite(&inputs)?,
        };
        let mut outs = outs.into_iter();
        let dx = outs.next().expect("dx first");
        Ok((dx, outs.next(), outs.next()))
    }
}

/// Adds one to a batch count, outside the graph.
fn count_batch(counter: Option<&Tensor>) -> Result<()> {
    match counter {
        Some(n) => autograd::no_grad(|| n.assign(&n.add_scalar(1.0)?)),
        None => Ok(()),
    }
}

/// Training-mode batch normalization from primitives, with the graph: `(y, mean, invstd)`
/// (`[C]` each) and, with `running`, the running statistics' new values (computed without
/// the graph, for the caller to assign).
#[allow(clippy::type_complexity)]
fn train_composite(
    x: &Tensor,
    running: Option<(&Tensor, &Tensor)>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor, Option<(Tensor, Tensor)>)> {
    let c = x.shape()[1];
    let mut bshape = vec![1; x.rank()];
    bshape[1] = c;
    let dims: Vec<usize> = (0..x.rank()).filter(|&d| d != 1).collect();
    let n: usize = dims.iter().map(|&d| x.shape()[d]).product();
    let mean = x.mean(&dims, true)?;
    let var = x.sub(&mean)?.square()?.mean(&dims, true)?;
    let new_running = match running {
        Some((rm, rv)) => Some(autograd::no_grad(|| -> Result<(Tensor, Tensor)> {
            let unbiased = var.reshape(&[c])?.mul_scalar(n as f64 / (n - 1) as f64)?;
            let new_mean = rm.mul_scalar(1.0 - momentum)?.add(&mean.reshape(&[c])?.mul_scalar(momentum)?)?;
            Ok((new_mean, rv.mul_scalar(1.0 - momentum)?.add(&unbiased.mul_scalar(momentum)?)?))
        })?),
        None => None,
    };
    let invstd = var.add_scalar(eps)?.rsqrt()?;
    let mut out = x.sub(&mean)?.mul(&invstd)?;
    if let Some(w) = weight {
        out = out.mul(&w.reshape(&bshape)?)?;
    }
    if let Some(b) = bias {
        out = out.add(&b.reshape(&bshape)?)?;
    }
    Ok((out, mean.reshape(&[c])?, invstd.reshape(&[c])?, new_running))
}

/// Batch normalization in training ([`Tensor::batch_norm`] with `training`) of `x` viewed as
/// `[N, C, L]` (`L` the product of the axes after 1, or 1 for `[N, C]`), with `M = N L`:
///
/// ```text
/// mean = sum(x[:, c, :]) / M;  var = sum((x[:, c, :] - mean)^2) / M;  invstd = 1 / sqrt(var + eps)
/// y = (x - mean) invstd weight + bias
/// running_mean' = (1 - momentum) running_mean + momentum mean
/// running_var'  = (1 - momentum) running_var + momentum var M / (M - 1)
/// ```
///
/// Statistics are accumulated in f32 or wider, whatever the dtype. Inputs (contiguous): `x`
/// `[N, C, ...]` with `M > 1`, then `weight`, `bias` `[C]` (when `affine`), then
/// `running_mean`, `running_var` `[C]` (when `running`), then `num_batches_tracked` (an I64
/// `[]`, when `count`, which comes only with `running`). Outputs: `y` shaped like `x`, `mean`
/// and `invstd` `[C]` (what the backward, [`BatchNormBackward`], reads), then the new
/// `running_mean`, `running_var` (when `running`) and `num_batches_tracked + 1` (when
/// `count`); the caller assigns them.
///
/// Mixed types: under autocast `x` may be f16 or bf16 with every `[C]` operand f32 (as
/// cuDNN's batch norm under `torch.autocast`); then `y` has `x`'s type and `mean`, `invstd`
/// and the running statistics are f32. A backend without that variant declines it (the
/// composite then computes in f32 and rounds `y` to `x`'s type).
#[derive(Clone, Copy, Debug)]
pub struct BatchNormTrain(pub BatchNormOptions);

impl CustomOp for BatchNormTrain {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let x = inputs[0];
        let stats = (vec![x.shape()[1]], inputs.get(1).map_or(x.dtype(), |p| p.dtype()));
        let mut outs = vec![(x.shape().to_vec(), x.dtype()), stats.clone(), stats.clone()];
        if self.0.running {
            outs.extend([stats.clone(), stats]);
        }
        if self.0.count {
            outs.push((vec![], DType::I64));
        }
        outs
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (x, o) = (inputs[0], self.0);
        let (params, counter) = if o.count { (&inputs[1..inputs.len() - 1], inputs.last()) } else { (&inputs[1..], None) };
        let (affine, running) = if o.affine { params.split_at(2) } else { (&params[..0], params) };
        let wide = inputs.get(1).map_or(x.dtype(), |p| p.dtype());
        // Mixed types: the composite in the parameters' type, `y` rounded back.
        let xw = x.to_dtype(wide)?;
        let (y, mean, invstd, new_running) = train_composite(
            &xw,
            running.first().zip(running.get(1)).map(|(m, v)| (*m, *v)),
            affine.first().copied(),
            affine.get(1).copied(),
            o.momentum,
            o.eps,
        )?;
        let y = if o.relu { y.relu()? } else { y };
        let mut outs = vec![y.to_dtype(x.dtype())?, mean, invstd];
        outs.extend(new_running.into_iter().flat_map(|(m, v)| [m, v]));
        if let Some(n) = counter {
            outs.push(n.add_scalar(1.0)?);
        }
        Ok(outs)
    }
}

/// The gradient of [`BatchNormTrain`] from its saved statistics, with `xhat = (x - mean)
/// invstd`:
///
/// ```text
/// dbias = sum(dy);  dweight = sum(dy xhat)
/// dx = weight invstd (dy - dbias / M - xhat dweight / M)
/// ```
///
/// per channel. Inputs (contiguous): `x`, `dy` (one shape), `mean`, `invstd` `[C]`, then
/// `weight` `[C]` (when `affine`, else `weight = 1`) and, when `affine` and `relu`, `bias`
/// `[C]`. Outputs: `dx`, then `dweight`, `dbias` `[C]` (when `affine`). With `relu`, `dy` is
/// first zeroed where the forward's output was not positive, that output computed again from
/// `x` (`xhat weight + bias`) rather than saved. `eps` and `momentum` are not read. Mixed types
/// as the forward's: `x`, `dy` and `dx` of a low type, the `[C]` operands and outputs f32.
#[derive(Clone, Copy, Debug)]
pub struct BatchNormBackward(pub BatchNormOptions);

impl CustomOp for BatchNormBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (x, mean) = (inputs[0], inputs[2]);
        let params = (vec![x.shape()[1]], mean.dtype());
        let mut outs = vec![(x.shape().to_vec(), x.dtype())];
        if self.0.affine {
            outs.extend([params.clone(), params]);
        }
        outs
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (x, dy, mean, invstd, weight, bias) = (inputs[0], inputs[1], inputs[2], inputs[3], inputs.get(4).copied(), inputs.get(5).copied());
        if x.dtype() != mean.dtype() {
            let wide = mean.dtype();
            let (xw, dyw) = (x.to_dtype(wide)?, dy.to_dtype(wide)?);
            let mut outs = self.composite(&[&xw, &dyw, mean, invstd].into_iter().chain(weight).chain(bias).collect::<Vec<_>>())?;
            outs[0] = outs[0].to_dtype(x.dtype())?;
            return Ok(outs);
        }
        let c = x.shape()[1];
        let mut bshape = vec![1; x.rank()];
        bshape[1] = c;
        let dims: Vec<usize> = (0..x.rank()).filter(|&d| d != 1).collect();
        let inv_m = c as f64 / x.numel() as f64;
        let invstd = invstd.reshape(&bshape)?;
        let xhat = x.sub(&mean.reshape(&bshape)?)?.mul(&invstd)?;
        let masked;
        let dy = if self.0.relu {
            let mut y = xhat.clone();
            if let (Some(w), Some(b)) = (weight, bias) {
                y = y.mul(&w.reshape(&bshape)?)?.add(&b.reshape(&bshape)?)?;
            }
            masked = Tensor::relu_backward(dy, &y)?;
            &masked
        } else {
            dy
        };
        let dbias = dy.sum(&dims, true)?;
        let dweight = dy.mul(&xhat)?.sum(&dims, true)?;
        let mut dx = dy.sub(&dbias.mul_scalar(inv_m)?)?.sub(&xhat.mul(&dweight.mul_scalar(inv_m)?)?)?.mul(&invstd)?;
        if let Some(w) = weight {
            dx = dx.mul(&w.reshape(&bshape)?)?;
        }
        Ok(if weight.is_some() { vec![dx, dweight.reshape(&[c])?, dbias.reshape(&[c])?] } else { vec![dx] })
    }
}

crate::custom_kernel_name! {
    BatchNormTrain => "batch_norm_train",
    BatchNormBackward => "batch_norm_backward",
}
