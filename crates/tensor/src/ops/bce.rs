//! Binary cross-entropy of probabilities, PyTorch's `binary_cross_entropy`: the elementwise
//! loss is a custom op ([`BceLoss`]), one kernel where the device has one, its gradient too
//! ([`BceLossBackward`]).

use crate::autograd;
use crate::custom::CustomOp;
use crate::error::Result;
use crate::fused::{self, fusion_enabled};
use crate::ops::check_float;
use crate::ops::loss::{check_same_shape, Reduction};
use crate::tensor::Tensor;

impl Tensor {
    /// Binary cross-entropy of probabilities `self` in `[0, 1]` against targets in `[0, 1]`
    /// (`torch.nn.functional.binary_cross_entropy`):
    /// `-(y max(log p, -100) + (1 - y) max(log(1 - p), -100))`, finite at `p = 0` and `p = 1`.
    /// The range of `p` is not checked (that would need a read-back); prefer
    /// [`Tensor::bce_with_logits`], which is stabler.
    ///
    /// # Shapes
    /// - `self`, `target`: `[*]`, the same shape
    /// - result: `[*]` for `Reduction::None`, else a scalar
    pub fn bce_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x, t]) = crate::autocast::widened([self, target])? {
            return x.bce_loss(&t, reduction);
        }
        check_float("bce_loss", self)?;
        check_same_shape("bce_loss", self, target)?;
        // One kernel where the device has one ([`BceLoss`]); a target that wants its own
        // gradient (PyTorch gives none) takes the composite, whose graph covers it.
        let plain_target = !(autograd::is_grad_enabled() && target.requires_grad());
        if fusion_enabled() && plain_target && self.dtype() == target.dtype() && self.device() == target.device() {
            let (p, y) = (self.contiguous()?, target.contiguous()?);
            return Reduction::apply(reduction, Tensor::custom(BceLoss, &[&p, &y])?.remove(0));
        }
        Reduction::apply(reduction, BceLoss.composite(&[self, target])?.remove(0))
    }
}

/// `max(log x, -100)`, finite at `x = 0` in value and gradient (PyTorch's BCE clamp).
fn clamped_log(x: &Tensor) -> Result<Tensor> {
    let pos = x.gt_scalar(0.0)?;
    // Taking the log of 1 where x = 0 keeps `0 * (1 / 0)` out of the backward pass.
    let safe = Tensor::where_cond(&pos, x, &x.scalar_like(1.0)?)?;
    Tensor::where_cond(&pos, &safe.log()?.maximum_scalar(-100.0)?, &x.scalar_like(-100.0)?)
}

/// Binary cross-entropy of probabilities, elementwise ([`Tensor::bce_loss`] before its
/// reduction): `l = -(y log_(p) + (1 - y) log_(1 - p))` where `log_(x)` is `max(ln x, -100)`
/// for `x > 0` and -100 otherwise. Inputs: `p`, `y` (one shape, contiguous). Output: `l`. Its
/// backward ([`BceLossBackward`]) gives `p` its gradient and `y` none.
#[derive(Clone, Copy, Debug)]
pub struct BceLoss;

impl CustomOp for BceLoss {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (p, y) = (inputs[0], inputs[1]);
        let one_minus = |t: &Tensor| t.neg()?.add_scalar(1.0);
        let pos = y.mul(&clamped_log(p)?)?;
        let neg = one_minus(y)?.mul(&clamped_log(&one_minus(p)?)?)?;
        Ok(vec![pos.add(&neg)?.neg()?])
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], _outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let g = grad.contiguous()?;
        let dp = fused::run_or_composite(&BceLossBackward, &[&inputs[0], &inputs[1], &g])?.remove(0);
        Ok(vec![Some(dp), None])
    }

    fn composite_has_grad(&self) -> bool {
        true
    }
}

/// The gradient of [`BceLoss`] with respect to `p`: `dp = g (-(y log_'(p)) + (1 - y) log_'(1 -
/// p))`, `log_'(x)` being `1 / x` where `x > 0` and `ln x >= -100`, else 0 (as the composite's
/// `maximum` gives ties to its first operand). Inputs: `p`, `y`, `g` (one shape, contiguous).
/// Output: `dp`.
#[derive(Clone, Copy, Debug)]
pub struct BceLossBackward;

impl CustomOp for BceLossBackward {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (p, y, g) = (inputs[0], inputs[1], inputs[2]);
        // d/dx of the clamped log: 1 / x where x > 0 and ln x >= -100, else 0.
        let slope = |x: &Tensor| -> Result<Tensor> {
            let zero = x.scalar_like(0.0)?;
            let safe = Tensor::where_cond(&x.gt_scalar(0.0)?, x, &x.scalar_like(1.0)?)?;
            let live = Tensor::where_cond(&safe.log()?.lt_scalar(-100.0)?, &zero, &safe.recip()?)?;
            Tensor::where_cond(&x.gt_scalar(0.0)?, &live, &zero)
        };
        let one_minus = |t: &Tensor| t.neg()?.add_scalar(1.0);
        let d = one_minus(y)?.mul(&slope(&one_minus(p)?)?)?.sub(&y.mul(&slope(p)?)?)?;
        Ok(vec![g.mul(&d)?])
    }
}

crate::custom_kernel_name! {
    BceLoss => "bce_loss",
    BceLossBackward => "bce_loss_backward",
}
