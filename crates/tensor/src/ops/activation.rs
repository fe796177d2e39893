//! Activations and softmax, built from primitives. Sigmoid, tanh, softmax and log-softmax keep
//! their composite forward but carry a closed-form backward rule: chaining the primitives'
//! rules through `1 / (1 + exp(-x))` gives `0 * inf = NaN` for large `|x|`. ReLU's rule reads
//! its output (`y > 0` exactly where `x > 0`), so the graph holds no mask: the composite's rule
//! saved the boolean mask, an activation's worth of memory (32 bits an element on wgpu) per
//! ReLU until backward. ReLU and its rule are one kernel each where the backend has them.

use crate::autograd::{self, GradFn};
use crate::error::Result;
use crate::fused::{fusion_enabled, try_fused, FusedOp};
use crate::layout::Layout;
use crate::ops::{check_float, Dim};
use crate::tensor::Tensor;

impl Tensor {
    /// Records `out` (computed without the graph) as the result of `self` through `grad_fn`.
    fn record_composite(&self, out: Tensor, grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        Tensor::view_op(out.storage(), out.layout().clone(), out.dtype(), out.device(), &[self], grad_fn)
    }

    /// `max(x, 0)`. The gradient at 0 is 0, as PyTorch's. (Written as a select rather than
    /// `maximum(x, 0)`, whose tie rule would pass the gradient at exactly 0.) One kernel where
    /// the device has one ([`FusedOp::Relu`]), its gradient too ([`FusedOp::ReluBackward`]).
    pub fn relu(&self) -> Result<Tensor> {
        check_float("relu", self)?;
        if fusion_enabled() {
            let x = self.contiguous()?;
            if let Some(r) = try_fused(&FusedOp::Relu, &[&x]) {
                return Ok(Tensor::from_op(r?.remove(0), x.shape(), x.dtype(), x.device(), &[&x], || GradFn::Relu));
            }
        }
        let out = autograd::no_grad(|| Tensor::where_cond(&self.gt_scalar(0.0)?, self, &self.scalar_like(0.0)?))?;
        Ok(self.record_composite(out, || GradFn::Relu))
    }

    /// The backward rule of [`Tensor::relu`] from its output `y`: `dy` where `y > 0`, else 0
    /// (`y > 0` exactly where `x > 0`), fused where the device can ([`FusedOp::ReluBackward`])
    /// and both are contiguous (a broadcast `dy`, as a sum's gradient is, would cost a copy
    /// first; the composite's select reads it as it is).
    pub(crate) fn relu_backward(dy: &Tensor, y: &Tensor) -> Result<Tensor> {
        if fusion_enabled() && dy.is_contiguous() && y.is_contiguous() {
            if let Some(r) = try_fused(&FusedOp::ReluBackward, &[y, dy]) {
                return Ok(Tensor::from_parts(r?.remove(0), Layout::contiguous(y.shape()), y.dtype(), y.device(), None));
            }
        }
        Tensor::where_cond(&y.gt_scalar(0.0)?, dy, &dy.scalar_like(0.0)?)
    }

    /// `max(x, 0) + slope * min(x, 0)`.
    pub fn leaky_relu(&self, slope: f64) -> Result<Tensor> {
        Tensor::where_cond(&self.gt_scalar(0.0)?, self, &self.mul_scalar(slope)?)
    }

    /// `1 / (1 + exp(-x))`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        check_float("sigmoid", self)?;
        let out = autograd::no_grad(|| self.neg()?.exp()?.add_scalar(1.0)?.recip())?;
        Ok(self.record_composite(out, || GradFn::Sigmoid))
    }

    /// `2 * sigmoid(2x) - 1`.
    pub fn tanh(&self) -> Result<Tensor> {
        check_float("tanh", self)?;
        let out = autograd::no_grad(|| self.mul_scalar(-2.0)?.exp()?.add_scalar(1.0)?.recip()?.mul_scalar(2.0)?.sub_scalar(1.0))?;
        Ok(self.record_composite(out, || GradFn::Tanh))
    }

    /// Exact GELU, `x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))`, PyTorch's default. Runs as one
    /// fused kernel where the device has one ([`FusedOp::Gelu`]), its gradient too
    /// ([`FusedOp::GeluBackward`]); otherwise from primitives, whose autograd is then the rule.
    pub fn gelu(&self) -> Result<Tensor> {
        check_float("gelu", self)?;
        if fusion_enabled() {
            let x = self.contiguous()?;
            if let Some(r) = try_fused(&FusedOp::Gelu, &[&x]) {
                return Ok(Tensor::from_op(r?.remove(0), x.shape(), x.dtype(), x.device(), &[&x], || GradFn::Gelu));
            }
        }
        let cdf = self.mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)?;
        self.mul(&cdf)
    }

    /// The backward rule of the fused [`Tensor::gelu`]: `dy (Phi(x) + x phi(x))`, itself fused
    /// where the device can ([`FusedOp::GeluBackward`]).
    pub(crate) fn gelu_backward(dy: &Tensor, x: &Tensor) -> Result<Tensor> {
        let dy = dy.contiguous()?;
        if let Some(r) = try_fused(&FusedOp::GeluBackward, &[x, &dy]) {
            return Ok(Tensor::from_parts(r?.remove(0), Layout::contiguous(x.shape()), x.dtype(), x.device(), None));
        }
        let cdf = x.mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)?;
        // phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
        let pdf = x.square()?.mul_scalar(-0.5)?.exp()?.mul_scalar(0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2)?;
        dy.mul(&cdf.add(&x.mul(&pdf)?)?)
    }

    /// `x * sigmoid(x)`.
    pub fn silu(&self) -> Result<Tensor> {
        self.mul(&self.sigmoid()?)
    }

    /// `log(1 + exp(x))`, computed as `max(x, 0) + log(1 + exp(-|x|))` so it never overflows;
    /// its gradient is `sigmoid(x)` everywhere, 0.5 at 0.
    pub fn softplus(&self) -> Result<Tensor> {
        check_float("softplus", self)?;
        let out = autograd::no_grad(|| self.relu()?.add(&self.abs()?.neg()?.exp()?.add_scalar(1.0)?.log()?))?;
        Ok(self.record_composite(out, || GradFn::Softplus))
    }

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
            if let Some(r) = try_fused(&FusedOp::SoftmaxLastDim, &[&x]) {
                return Ok(Tensor::from_op(r?.remove(0), x.shape(), x.dtype(), x.device(), &[&x], || GradFn::Softmax { dim: d }));
            }
        }
        let out = autograd::no_grad(|| {
            let e = self.sub(&self.max(d, true)?)?.exp()?;
            e.div(&e.sum(&[d], true)?)
        })?;
        Ok(self.record_composite(out, || GradFn::Softmax { dim: d }))
    }

    /// The backward rule of [`Tensor::softmax`] from its output `y`: `y (dy - sum(dy y))` along
    /// `dim`, fused where the device can and `dim` is the last ([`FusedOp::SoftmaxLastDimBackward`]).
    pub(crate) fn softmax_backward(dy: &Tensor, y: &Tensor, dim: usize) -> Result<Tensor> {
        if dim + 1 == y.rank() && fusion_enabled() {
            let (y, dy) = (y.contiguous()?, dy.contiguous()?);
            if let Some(r) = try_fused(&FusedOp::SoftmaxLastDimBackward, &[&y, &dy]) {
                return Ok(Tensor::from_parts(r?.remove(0), Layout::contiguous(y.shape()), y.dtype(), y.device(), None));
            }
        }
        let dot = dy.mul(y)?.sum(&[dim], true)?;
        y.mul(&dy.sub(&dot)?)
    }

    /// `x - logsumexp(x)` along `dim`.
    pub fn log_softmax(&self, dim: impl Dim) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.log_softmax(dim);
        }
        check_float("log_softmax", self)?;
        let d = dim.resolve("log_softmax", self.rank())?;
        let out = autograd::no_grad(|| self.sub(&self.logsumexp(d, true)?))?;
        Ok(self.record_composite(out, || GradFn::LogSoftmax { dim: d }))
    }
}
