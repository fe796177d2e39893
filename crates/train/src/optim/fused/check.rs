//! The loss scaler's check of the gradients as tensor ops: [`crate::amp::nonfinite_flag`]'s
//! work, and the composite of [`super::UnscaleCheck`]'s second half.

use liandan_tensor::{DType, NoGradGuard, Result, Tensor};

use super::{update_foreach, Scale};

/// [`crate::amp::nonfinite_flag`] of the gradients themselves.
pub(crate) fn nonfinite(grads: &[Tensor]) -> Result<Option<Tensor>> {
    let _no_grad = NoGradGuard::new();
    let mut total: Option<Tensor> = None;
    for (flat, copied) in joined(grads)? {
        let zeroed = if copied && update_foreach(&Scale(0.0), &[vec![&flat]])?[0] { flat } else { flat.mul_scalar(0.0)? };
        let s = zeroed.sum_all()?.to_dtype(DType::F32)?;
        total = Some(match total {
            Some(t) => t.add(&s)?,
            None => s,
        });
    }
    Ok(total)
}

/// Elements of gradients joined into one flat tensor at most (a gradient larger than this is
/// a group of its own): 256 MiB of f32, within what a GPU binds at once.
const JOIN_ELEMENTS: usize = 1 << 26;

/// The gradients flattened and joined, one tensor per dtype and device (and per
/// [`JOIN_ELEMENTS`]), each with whether it is a copy (a group of one is the gradient itself).
fn joined(grads: &[Tensor]) -> Result<Vec<(Tensor, bool)>> {
    let mut groups: Vec<(Vec<Tensor>, usize)> = Vec::new();
    for g in grads {
        let (n, flat) = (g.numel(), g.reshape(&[g.numel()])?);
        match groups.iter_mut().find(|(gs, total)| gs[0].dtype() == g.dtype() && gs[0].device() == g.device() && total + n <= JOIN_ELEMENTS) {
            Some((gs, total)) => {
                gs.push(flat);
                *total += n;
            }
            None => groups.push((vec![flat], n)),
        }
    }
    groups
        .into_iter()
        .map(|(gs, _)| Ok(if gs.len() == 1 { (gs[0].clone(), false) } else { (Tensor::cat(&gs.iter().collect::<Vec<_>>(), 0usize)?, true) }))
        .collect()
}
