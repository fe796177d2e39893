//! Fused optimizer updates ([`FusedOp::AdamStep`], [`FusedOp::SgdStep`]): one pass over a
//! parameter and its state instead of one pass per primitive of the composite, with the
//! composite's order of operations. Halves compute in f32 and round on store (state read back
//! through the same rounding, so what the next step reads is what was stored).

use liandan_tensor::{AdamStep, FusedOp, Result, SgdStep, Strided};
use num_traits::{Float, NumCast};

use crate::fused::{slices, Elem};
use crate::storage::CpuStorage;

/// `x` as the accumulator type (hyper-parameters arrive in f64).
fn acc<A: Float>(x: f64) -> A {
    <A as NumCast>::from(x).expect("a float converts to every float type")
}

/// `FusedOp::AdamStep`: param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq] to their new
/// param, exp_avg, exp_avg_sq[, max_exp_avg_sq].
pub(crate) fn adam_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::AdamStep(a) = op else { unreachable!("adam_step is dispatched for AdamStep only") };
    let AdamStep { beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay, .. } = *a;
    let v = slices::<T>("adam_step", inputs)?;
    let n = v[0].len();
    let (step_size, bias_correction2_sqrt) = a.corrections();
    let (wd, shrink) = (acc::<T::Acc>(weight_decay), acc::<T::Acc>(1.0 - a.lr * weight_decay));
    // The composite's lerp weight and its complement, both from f64 as it computes them.
    let (w1, w1_rest) = (acc::<T::Acc>(1.0 - beta1), acc::<T::Acc>(1.0 - (1.0 - beta1)));
    let (b2, b2_rest) = (acc::<T::Acc>(beta2), acc::<T::Acc>(1.0 - beta2));
    let (bc2, eps, neg_step) = (acc::<T::Acc>(bias_correction2_sqrt), acc::<T::Acc>(eps), acc::<T::Acc>(-step_size));
    let round = |x: T::Acc| T::narrow(x);
    let mut outs: Vec<Vec<T>> = (0..op.outputs()).map(|_| Vec::with_capacity(n)).collect();
    // `i` indexes every operand at once.
    #[allow(clippy::needless_range_loop)]
    for i in 0..n {
        let param = v[0][i].widen();
        let mut g = if maximize { -v[1][i].widen() } else { v[1][i].widen() };
        let mut p = param;
        if decoupled_weight_decay {
            if weight_decay != 0.0 {
                p = round(p * shrink).widen();
            }
        } else if weight_decay != 0.0 {
            g = round(g + round(param * wd).widen()).widen();
        }
        // torch.lerp's two branches, as the composite's `lerp`.
        let m0 = v[2][i].widen();
        let m = round(if (1.0 - beta1).abs() < 0.5 { m0 + (g - m0) * w1 } else { g - (g - m0) * w1_rest });
        let sq = round(v[3][i].widen() * b2 + g * b2_rest * g);
        let second = if amsgrad { v[4][i].max(sq) } else { sq };
        let denom = second.widen().sqrt() / bc2 + eps;
        outs[0].push(round(p + m.widen() / denom * neg_step));
        outs[1].push(m);
        outs[2].push(sq);
        if amsgrad {
            outs[3].push(second);
        }
    }
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}

/// `FusedOp::SgdStep`: param, grad[, momentum_buffer] to their new param[, momentum_buffer].
pub(crate) fn sgd_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::SgdStep(s) = op else { unreachable!("sgd_step is dispatched for SgdStep only") };
    let SgdStep { lr, momentum, dampening, weight_decay, nesterov, maximize, first } = *s;
    let v = slices::<T>("sgd_step", inputs)?;
    let n = v[0].len();
    let (wd, mom, keep, lr) = (acc::<T::Acc>(weight_decay), acc::<T::Acc>(momentum), acc::<T::Acc>(1.0 - dampening), acc::<T::Acc>(lr));
    let round = |x: T::Acc| T::narrow(x).widen();
    let mut outs: Vec<Vec<T>> = (0..op.outputs()).map(|_| Vec::with_capacity(n)).collect();
    // `i` indexes every operand at once.
    #[allow(clippy::needless_range_loop)]
    for i in 0..n {
        let param = v[0][i].widen();
        let mut g = if maximize { -v[1][i].widen() } else { v[1][i].widen() };
        if weight_decay != 0.0 {
            g = round(g + round(param * wd));
        }
        if momentum != 0.0 {
            let buf = if first {
                g
            } else if dampening == 0.0 {
                round(round(v[2][i].widen() * mom) + g)
            } else {
                round(round(v[2][i].widen() * mom) + round(g * keep))
            };
            outs[1].push(T::narrow(buf));
            g = if nesterov { round(g + round(buf * mom)) } else { buf };
        }
        outs[0].push(T::narrow(param - round(g * lr)));
    }
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}
