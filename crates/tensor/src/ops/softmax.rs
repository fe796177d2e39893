//! Softmax, log-softmax and logsumexp, built from primitives, with closed-form backward
//! rules. Softmax and log-softmax along the last axis, and their rules, are custom ops: one
//! kernel each where the backend has one.

use crate::autograd::{self, GradFn};
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::fused::{self, fusion_enabled};
use crate::ops::{check_float, Dim};
use crate::tensor::Tensor;

impl Tensor {
    /// `log(sum(exp(x)))` along `dim`, shifted by the maximum so it never overflows.
    pub fn logsumexp(&self, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.logsumexp(dim, keepdim);
        }
        check_float("logsumexp", self)?;
        let d = dim.resolve("logsumexp", self.rank())?;
        // The shift is a constant for the gradient: it cancels exactly.
        let m = self.max(d, true)?.detach();
        let m = Tensor::where_cond(&m.abs()?.lt_scalar(f64::INFINITY)?, &m, &m.zeros_like()?)?;
        let lse = self.sub(&m)?.exp()?.sum(&[d], true)?.log()?.add(&m)?;
        if keepdim {
            Ok(lse)
        } else {
            lse.squeeze(d)
        }
    }

    /// `exp(x) / sum(exp(x))` along `dim`.
    pub fn softmax(&self, dim: impl Dim) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.softmax(dim);
        }
        check_float("softmax", self)?;
        let d = dim.resolve("softmax", self.rank())?;
        if d + 1 == self.rank() && fusion_enabled() {
            let x = self.contiguous()?;
            if let Some(r) = fused::run(&SoftmaxLastDim, &[&x]) {
                return Ok(r?.remove(0).recorded(&[&x], || GradFn::Softmax { dim: d }));
            }
        }
        let out = autograd::no_grad(|| softmax_along(self, d))?;
        Ok(out.recorded(&[self], || GradFn::Softmax { dim: d }))
    }

    /// Softmax along the last axis of an f16 tensor in f16, as one kernel computing in f32
    /// inside, where the device has it (`None` elsewhere, and for other types): attention's
    /// probabilities under autocast, as PyTorch's attention computes them there (the f32
    /// softmax's values rounded for the product that reads them, without the casts to f32 and
    /// back each way). Not bf16: held packed on a GPU, its unpacking and packing around the
    /// kernel cost vit's step more than the casts.
    pub(crate) fn softmax_low_fused(&self) -> Result<Option<Tensor>> {
        if self.dtype() != DType::F16 || self.rank() == 0 || !fusion_enabled() {
            return Ok(None);
        }
        let x = self.contiguous()?;
        let d = self.rank() - 1;
        match fused::run(&SoftmaxLastDim, &[&x]) {
            Some(r) => Ok(Some(r?.remove(0).recorded(&[&x], || GradFn::Softmax { dim: d }))),
            None => Ok(None),
        }
    }

    /// The backward rule of [`Tensor::softmax`] from its output `y`: `y (dy - sum(dy y))` along
    /// `dim`, fused where the device can and `dim` is the last ([`SoftmaxLastDimBackward`]).
    pub(crate) fn softmax_backward(dy: &Tensor, y: &Tensor, dim: usize) -> Result<Tensor> {
        if dim + 1 == y.rank() && fusion_enabled() {
            let (y, dy) = (y.contiguous()?, dy.contiguous()?);
            if let Some(r) = fused::run(&SoftmaxLastDimBackward, &[&y, &dy]) {
                return Ok(r?.remove(0));
            }
        }
        softmax_backward_along(dy, y, dim)
    }

    /// `x - logsumexp(x)` along `dim`.
    pub fn log_softmax(&self, dim: impl Dim) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.log_softmax(dim);
        }
        check_float("log_softmax", self)?;
        let d = dim.resolve("log_softmax", self.rank())?;
        if d + 1 == self.rank() && fusion_enabled() {
            let x = self.contiguous()?;
            if let Some(r) = fused::run(&LogSoftmaxLastDim, &[&x]) {
                return Ok(r?.remove(0).recorded(&[&x], || GradFn::LogSoftmax { dim: d }));
            }
        }
        let out = autograd::no_grad(|| log_softmax_along(self, d))?;
        Ok(out.recorded(&[self], || GradFn::LogSoftmax { dim: d }))
    }

    /// The backward rule of [`Tensor::log_softmax`] from its output `y`: `dy - exp(y)
    /// sum(dy)` along `dim`, fused where the device can and `dim` is the last
    /// ([`LogSoftmaxLastDimBackward`]).
    pub(crate) fn log_softmax_backward(dy: &Tensor, y: &Tensor, dim: usize) -> Result<Tensor> {
        if dim + 1 == y.rank() && fusion_enabled() {
            let (y, dy) = (y.contiguous()?, dy.contiguous()?);
            if let Some(r) = fused::run(&LogSoftmaxLastDimBackward, &[&y, &dy]) {
                return Ok(r?.remove(0));
            }
        }
        log_softmax_backward_along(dy, y, dim)
    }
}

/// `x - logsumexp(x)` along `d` from primitives.
fn log_softmax_along(x: &Tensor, d: usize) -> Result<Tensor> {
    x.sub(&x.logsumexp(d, true)?)
}

/// Log-softmax's gradient along `d` from primitives: `dy - exp(y) sum(dy)`.
fn log_softmax_backward_along(dy: &Tensor, y: &Tensor, d: usize) -> Result<Tensor> {
    let total = dy.sum(&[d], true)?;
    dy.sub(&y.exp()?.mul(&total)?)
}

/// Softmax of `x` along `d` from primitives, each row shifted by its maximum.
fn softmax_along(x: &Tensor, d: usize) -> Result<Tensor> {
    let e = x.sub(&x.max(d, true)?)?.exp()?;
    e.div(&e.sum(&[d], true)?)
}

/// Softmax's gradient along `d` from primitives: `y (dy - sum(dy y))`.
fn softmax_backward_along(dy: &Tensor, y: &Tensor, d: usize) -> Result<Tensor> {
    let dot = dy.mul(y)?.sum(&[d], true)?;
    y.mul(&dy.sub(&dot)?)
}

/// Softmax along the last axis ([`Tensor::softmax`] with `dim` the last), each row shifted by
/// its maximum: `y = exp(x - max(x)) / sum(exp(x - max(x)))`. Input: `x`, contiguous. Output:
/// `y`, shaped like `x`.
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxLastDim;

impl CustomOp for SoftmaxLastDim {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0];
        Ok(vec![softmax_along(x, x.rank().saturating_sub(1))?])
    }
}

/// The gradient of [`SoftmaxLastDim`], `dx = y (dy - sum(dy y))` with the sum along the last
/// axis. Inputs: `y`, `dy` (one shape, contiguous). Output: `dx`.
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxLastDimBackward;

impl CustomOp for SoftmaxLastDimBackward {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (y, dy) = (inputs[0], inputs[1]);
        Ok(vec![softmax_backward_along(dy, y, y.rank().saturating_sub(1))?])
    }
}

/// Log-softmax along the last axis ([`Tensor::log_softmax`] with `dim` the last), as the
/// composite computes it: `y = x - (log(sum(exp(x - m))) + m)` with `m` the row's maximum where
/// it is finite, else 0. Input: `x`, contiguous. Output: `y`, shaped like `x`. A cross-entropy
/// loss's largest part: some ten kernels composed.
#[derive(Clone, Copy, Debug)]
pub struct LogSoftmaxLastDim;

impl CustomOp for LogSoftmaxLastDim {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0];
        Ok(vec![log_softmax_along(x, x.rank().saturating_sub(1))?])
    }
}

/// The gradient of [`LogSoftmaxLastDim`], `dx = dy - exp(y) sum(dy)` with the sum along the
/// last axis. Inputs: `y`, `dy` (one shape, contiguous). Output: `dx`.
#[derive(Clone, Copy, Debug)]
pub struct LogSoftmaxLastDimBackward;

impl CustomOp for LogSoftmaxLastDimBackward {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (y, dy) = (inputs[0], inputs[1]);
        Ok(vec![log_softmax_backward_along(dy, y, y.rank().saturating_sub(1))?])
    }
}

crate::custom_kernel_name! {
    SoftmaxLastDim => "softmax_last_dim",
    SoftmaxLastDimBackward => "softmax_last_dim_backward",
    LogSoftmaxLastDim => "log_softmax_last_dim",
    LogSoftmaxLastDimBackward => "log_softmax_last_dim_backward",
}
