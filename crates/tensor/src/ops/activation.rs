//! Activations, built from primitives. Sigmoid and tanh keep their composite forward but carry
//! a closed-form backward rule: chaining the primitives' rules through `1 / (1 + exp(-x))`
//! gives `0 * inf = NaN` for large `|x|`. ReLU's rule reads its output (`y > 0` exactly where
//! `x > 0`), so the graph holds no mask: the composite's rule saved the boolean mask, an
//! activation's worth of memory (32 bits an element on wgpu) per ReLU until backward. ReLU and
//! GELU, and their rules, are custom ops: one kernel each where the backend has one.

use crate::autograd::{self, GradFn};
use crate::custom::CustomOp;
use crate::error::Result;
use crate::fused::{self, fusion_enabled};
use crate::ops::{check_float, check_same_device};
use crate::tensor::Tensor;

impl Tensor {
    /// `max(x, 0)`. The gradient at 0 is 0, as PyTorch's. (Written as a select rather than
    /// `maximum(x, 0)`, whose tie rule would pass the gradient at exactly 0.) One kernel where
    /// the device has one ([`Relu`]), its gradient too ([`ReluBackward`]).
    pub fn relu(&self) -> Result<Tensor> {
        check_float("relu", self)?;
        if fusion_enabled() {
            let x = self.contiguous()?;
            if let Some(r) = fused::run(&Relu, &[&x]) {
                return Ok(r?.remove(0).recorded(&[&x], || GradFn::Relu));
            }
        }
        let out = autograd::no_grad(|| Relu.composite(&[self]))?.remove(0);
        Ok(out.recorded(&[self], || GradFn::Relu))
    }

    /// The backward rule of [`Tensor::relu`] from its output `y`: `dy` where `y > 0`, else 0
    /// (`y > 0` exactly where `x > 0`), fused where the device can ([`ReluBackward`]) and both
    /// are contiguous (a broadcast `dy`, as a sum's gradient is, would cost a copy first; the
    /// composite's select reads it as it is).
    pub(crate) fn relu_backward(dy: &Tensor, y: &Tensor) -> Result<Tensor> {
        if fusion_enabled() && dy.is_contiguous() && y.is_contiguous() {
            if let Some(r) = fused::run(&ReluBackward, &[y, dy]) {
                return Ok(r?.remove(0));
            }
        }
        Ok(ReluBackward.composite(&[y, dy])?.remove(0))
    }

    /// `self.add(other)?.relu()` (a residual block's `F.relu(out + identity)`): the same values
    /// and gradients; one kernel ([`AddRelu`]) where the device has it, for operands of one
    /// shape and dtype, else the two ops.
    pub fn add_relu(&self, other: &Tensor) -> Result<Tensor> {
        check_float("add_relu", self)?;
        check_same_device("add_relu", self, other)?;
        if fusion_enabled() && self.shape() == other.shape() && self.dtype() == other.dtype() {
            let (a, b) = (self.contiguous()?, other.contiguous()?);
            if let Some(r) = fused::run(&AddRelu, &[&a, &b]) {
                return Ok(r?.remove(0).recorded(&[&a, &b], || GradFn::AddRelu));
            }
        }
        self.add(other)?.relu()
    }

    /// `max(x, 0) + slope * min(x, 0)`.
    pub fn leaky_relu(&self, slope: f64) -> Result<Tensor> {
        Tensor::where_cond(&self.gt_scalar(0.0)?, self, &self.mul_scalar(slope)?)
    }

    /// `1 / (1 + exp(-x))`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        check_float("sigmoid", self)?;
        let out = autograd::no_grad(|| self.neg()?.exp()?.add_scalar(1.0)?.recip())?;
        Ok(out.recorded(&[self], || GradFn::Sigmoid))
    }

    /// `2 * sigmoid(2x) - 1`.
    pub fn tanh(&self) -> Result<Tensor> {
        check_float("tanh", self)?;
        let out = autograd::no_grad(|| self.mul_scalar(-2.0)?.exp()?.add_scalar(1.0)?.recip()?.mul_scalar(2.0)?.sub_scalar(1.0))?;
        Ok(out.recorded(&[self], || GradFn::Tanh))
    }

    /// Exact GELU, `x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))`, PyTorch's default: the custom op
    /// [`Gelu`], one kernel where the device has one (its gradient too, [`GeluBackward`]);
    /// otherwise from primitives, whose autograd is then the rule.
    pub fn gelu(&self) -> Result<Tensor> {
        check_float("gelu", self)?;
        // The kernels take contiguous inputs; with fusion off the composite reads `self` as it is.
        let x = if fusion_enabled() { self.contiguous()? } else { self.clone() };
        Ok(Tensor::custom(Gelu, &[&x])?.remove(0))
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
        Ok(out.recorded(&[self], || GradFn::Softplus))
    }
}

/// ReLU as one kernel ([`Tensor::relu`]): `y = x > 0 ? x : 0` elementwise (so NaN gives 0, as
/// the composite's select does). Input: `x`, contiguous. Output: `y`, shaped like `x`.
#[derive(Clone, Copy, Debug)]
pub struct Relu;

impl CustomOp for Relu {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0];
        Ok(vec![Tensor::where_cond(&x.gt_scalar(0.0)?, x, &x.scalar_like(0.0)?)?])
    }
}

/// ReLU of a sum, `y = relu(a + b)` elementwise ([`Tensor::add_relu`]); its gradient, the same
/// for both operands, is [`ReluBackward`]'s from `y`. Inputs: `a`, `b` (one shape and dtype,
/// contiguous). Output: `y`.
#[derive(Clone, Copy, Debug)]
pub struct AddRelu;

impl CustomOp for AddRelu {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Relu.composite(&[&inputs[0].add(inputs[1])?])
    }
}

/// The gradient of [`Relu`] read from its output: `dx = y > 0 ? dy : 0`. Inputs: `y`, `dy`
/// (one shape, contiguous). Output: `dx`.
#[derive(Clone, Copy, Debug)]
pub struct ReluBackward;

impl CustomOp for ReluBackward {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (y, dy) = (inputs[0], inputs[1]);
        Ok(vec![Tensor::where_cond(&y.gt_scalar(0.0)?, dy, &dy.scalar_like(0.0)?)?])
    }
}

/// Exact GELU ([`Tensor::gelu`]), `y = 0.5 x (1 + erf(x / sqrt 2))`, elementwise. Input: `x`,
/// contiguous. Output: `y`, shaped like `x`. Its backward is [`GeluBackward`].
#[derive(Clone, Copy, Debug)]
pub struct Gelu;

impl CustomOp for Gelu {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0];
        let cdf = x.mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)?;
        Ok(vec![x.mul(&cdf)?])
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], _outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let dy = grad.contiguous()?;
        Ok(vec![Some(fused::run_or_composite(&GeluBackward, &[&inputs[0], &dy])?.remove(0))])
    }

    fn composite_has_grad(&self) -> bool {
        true
    }
}

/// The gradient of [`Gelu`], `dx = dy (Phi(x) + x phi(x))` with `Phi` the normal CDF and `phi`
/// its density. Inputs: `x`, `dy` (one shape, contiguous). Output: `dx`.
#[derive(Clone, Copy, Debug)]
pub struct GeluBackward;

impl CustomOp for GeluBackward {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (x, dy) = (inputs[0], inputs[1]);
        let cdf = x.mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)?;
        // phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
        let pdf = x.square()?.mul_scalar(-0.5)?.exp()?.mul_scalar(0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2)?;
        Ok(vec![dy.mul(&cdf.add(&x.mul(&pdf)?)?)?])
    }
}

crate::custom_kernel_name! {
    Relu => "relu",
    AddRelu => "add_relu",
    ReluBackward => "relu_backward",
    Gelu => "gelu",
    GeluBackward => "gelu_backward",
}
