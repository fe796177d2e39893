//! Gradient clipping, as `torch.nn.utils.clip_grad_norm_` and `clip_grad_value_`.

use liandan_tensor::{NoGradGuard, Tensor};

use super::core::invalid;
use crate::error::Result;

/// Scales the gradients of `params` so that their global `norm_type`-norm (2.0 for L2,
/// `f64::INFINITY` for the largest magnitude) is at most `max_norm`, and returns the norm
/// before clipping as a one-element tensor on the gradients' device.
///
/// Nothing is read back: `.item_f64()` on the result costs a device sync, so ask for it only
/// when you log it. As PyTorch, the gradients are always multiplied by
/// `min(1, max_norm / (norm + 1e-6))`; parameters without a gradient are skipped, and when
/// none has one the norm is 0.
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64, norm_type: f64) -> Result<Tensor> {
    const OP: &str = "clip_grad_norm_";
    if norm_type.is_nan() || norm_type <= 0.0 {
        return Err(invalid(OP, format!("norm_type {norm_type} must be > 0 (2.0 for L2, f64::INFINITY for the largest magnitude)")));
    }
    if max_norm.is_nan() || max_norm < 0.0 {
        return Err(invalid(OP, format!("max_norm {max_norm} must be >= 0")));
    }
    let first = params.first().ok_or_else(|| invalid(OP, "no parameters given".into()))?;
    let _no_grad = NoGradGuard::new();
    let grads: Vec<(&Tensor, Tensor)> = params.iter().filter_map(|p| p.grad().map(|g| (p, g))).collect();
    if grads.is_empty() {
        return Ok(Tensor::scalar(0.0, first.dtype(), first.device())?);
    }
    // One norm per tensor, then the norm of the norms: the same two-level reduction as
    // PyTorch, which keeps the rounding of very large models in check.
    let norms = grads.iter().map(|(_, g)| norm(g, norm_type)).collect::<Result<Vec<_>>>()?;
    let norms: Vec<Tensor> = norms.iter().map(|n| n.reshape(&[1])).collect::<std::result::Result<_, _>>()?;
    let total = norm(&Tensor::cat(&norms.iter().collect::<Vec<_>>(), 0)?, norm_type)?;
    let coef = Tensor::full(&[], max_norm, total.dtype(), total.device())?.div(&total.add_scalar(1e-6)?)?.minimum_scalar(1.0)?;
    for (p, g) in &grads {
        p.set_grad(Some(g.mul(&coef)?));
    }
    Ok(total)
}

/// The `norm_type`-norm of all of `x`'s elements, as a 0-d tensor.
fn norm(x: &Tensor, norm_type: f64) -> Result<Tensor> {
    Ok(if norm_type == f64::INFINITY {
        x.abs()?.max_all()?
    } else if norm_type == 2.0 {
        x.square()?.sum_all()?.sqrt()?
    } else {
        x.abs()?.pow_scalar(norm_type)?.sum_all()?.pow_scalar(1.0 / norm_type)?
    })
}

/// Clamps every gradient of `params` to `[-clip_value, clip_value]`.
pub fn clip_grad_value_(params: &[Tensor], clip_value: f64) -> Result<()> {
    if clip_value.is_nan() || clip_value < 0.0 {
        return Err(invalid("clip_grad_value_", format!("clip_value {clip_value} must be >= 0")));
    }
    let _no_grad = NoGradGuard::new();
    for p in params {
        if let Some(g) = p.grad() {
            p.set_grad(Some(g.clamp(-clip_value, clip_value)?));
        }
    }
    Ok(())
}
