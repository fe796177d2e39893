//! Fused optimizer updates ([`FusedOp::AdamStep`], [`FusedOp::SgdStep`],
//! [`FusedOp::RmsPropStep`], [`FusedOp::AdagradStep`], [`FusedOp::AdadeltaStep`]; and the loss
//! scaler's [`FusedOp::Scale`]): one pass over a
//! parameter and its state instead of one pass per primitive of the composite, with the
//! composite's order of operations. Halves compute in f32 and round on store (state read back
//! through the same rounding, so what the next step reads is what was stored).

use liandan_tensor::{AdadeltaStep, AdagradStep, AdamStep, FusedOp, Result, RmsPropStep, SgdStep, Strided};
use num_traits::{Float, NumCast};
use rayon::prelude::*;

use crate::fused::{slices, Elem};
use crate::storage::{alloc, CpuStorage};
use crate::strided::{parallel, CHUNK};

/// Runs `body(ins, outs)` once over whole operands, or, when they are large, over pieces of
/// `CHUNK` elements on the thread pool: every input and output `n` long or empty (an absent
/// state, passed to every piece empty). An update is elementwise, so the pieces are independent
/// and the result does not depend on the threads.
pub(crate) fn in_pieces<T: Elem>(ins: &[&[T]], outs: &mut [Vec<T>], body: impl Fn(&[&[T]], &mut [&mut [T]]) + Sync) {
    let n = ins[0].len();
    if !parallel(n) {
        let mut whole: Vec<&mut [T]> = outs.iter_mut().map(|o| &mut o[..]).collect();
        return body(ins, &mut whole);
    }
    let mut pieces: Vec<Vec<&mut [T]>> = (0..n.div_ceil(CHUNK)).map(|_| Vec::with_capacity(outs.len())).collect();
    for o in outs.iter_mut() {
        if o.is_empty() {
            pieces.iter_mut().for_each(|p| p.push(&mut []));
        } else {
            o.chunks_mut(CHUNK).zip(&mut pieces).for_each(|(c, p)| p.push(c));
        }
    }
    pieces.into_par_iter().enumerate().for_each(|(k, mut outs)| {
        let at = k * CHUNK..((k + 1) * CHUNK).min(n);
        let ins: Vec<&[T]> = ins.iter().map(|x| if x.is_empty() { *x } else { &x[at.clone()] }).collect();
        body(&ins, &mut outs);
    });
}

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
    let low_weight = (1.0 - beta1).abs() < 0.5;
    // Outputs written in place and every operand cut to `n` up front: the loop then has no
    // capacity or bounds checks, and its flags are loop-invariant, so it vectorizes (pushing
    // into four vectors kept it scalar).
    let mut outs: Vec<Vec<T>> = (0..op.outputs()).map(|_| alloc("optimizer step", n, T::default())).collect::<Result<_>>()?;
    let ins: Vec<&[T]> = v.iter().map(|x| &x[..n]).collect();
    in_pieces(&ins, &mut outs, move |ins, outs| {
        let n = ins[0].len();
        let (params, grads, avgs, sqs) = (&ins[0][..n], &ins[1][..n], &ins[2][..n], &ins[3][..n]);
        let maxes = if amsgrad { &ins[4][..n] } else { sqs };
        let (new_params, rest) = outs.split_at_mut(1);
        let (new_params, (new_avgs, rest)) = (&mut new_params[0][..n], rest.split_at_mut(1));
        let (new_avgs, (new_sqs, new_maxes)) = (&mut new_avgs[0][..n], rest.split_at_mut(1));
        let new_sqs = &mut new_sqs[0][..n];
        for i in 0..n {
            let param = params[i].widen();
            let mut g = if maximize { -grads[i].widen() } else { grads[i].widen() };
            let mut p = param;
            if decoupled_weight_decay {
                if weight_decay != 0.0 {
                    p = round(p * shrink).widen();
                }
            } else if weight_decay != 0.0 {
                g = round(g + round(param * wd).widen()).widen();
            }
            // torch.lerp's two branches, as the composite's `lerp`.
            let m0 = avgs[i].widen();
            let m = round(if low_weight { m0 + (g - m0) * w1 } else { g - (g - m0) * w1_rest });
            let sq = round(sqs[i].widen() * b2 + g * b2_rest * g);
            let second = if amsgrad { maxes[i].max(sq) } else { sq };
            let denom = second.widen().sqrt() / bc2 + eps;
            new_params[i] = round(p + m.widen() / denom * neg_step);
            new_avgs[i] = m;
            new_sqs[i] = sq;
            if amsgrad {
                new_maxes[0][i] = second;
            }
        }
    });
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}

/// `FusedOp::Scale`: x to x * factor, the factor rounded to the dtype first (as
/// `Tensor::mul_scalar`'s scalar operand is), the product in the accumulation type and
/// rounded once.
pub(crate) fn scale_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::Scale(factor) = op else { unreachable!("scale_step is dispatched for Scale only") };
    let v = slices::<T>("scale", inputs)?;
    let n = v[0].len();
    let f = T::narrow(acc::<T::Acc>(*factor)).widen();
    let mut out = vec![alloc("scale", n, T::default())?];
    in_pieces(&[&v[0][..n]], &mut out, move |ins, outs| {
        outs[0].iter_mut().zip(ins[0].iter()).for_each(|(out, &x)| *out = T::narrow(x.widen() * f));
    });
    Ok(vec![T::wrap(out.remove(0).into())])
}

/// `FusedOp::SgdStep`: param, grad[, momentum_buffer] to their new param[, momentum_buffer].
pub(crate) fn sgd_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::SgdStep(s) = op else { unreachable!("sgd_step is dispatched for SgdStep only") };
    let SgdStep { lr, momentum, dampening, weight_decay, nesterov, maximize, first } = *s;
    let v = slices::<T>("sgd_step", inputs)?;
    let n = v[0].len();
    let (wd, mom, keep, lr) = (acc::<T::Acc>(weight_decay), acc::<T::Acc>(momentum), acc::<T::Acc>(1.0 - dampening), acc::<T::Acc>(lr));
    let round = |x: T::Acc| T::narrow(x).widen();
    if momentum == 0.0 {
        // Plain SGD as one zipped loop the compiler vectorizes (the indexed loop below does
        // not), written here where the flags are known so it takes them out of the loop.
        let mut params = vec![alloc("sgd_step", n, T::default())?];
        in_pieces(&[&v[0][..n], &v[1][..n]], &mut params, move |ins, outs| {
            outs[0].iter_mut().zip(ins[0].iter().zip(ins[1].iter())).for_each(|(out, (&p, &g))| {
                let param = p.widen();
                let mut g = if maximize { -g.widen() } else { g.widen() };
                if weight_decay != 0.0 {
                    g = round(g + round(param * wd));
                }
                *out = T::narrow(param - round(g * lr));
            });
        });
        return Ok(vec![T::wrap(params.remove(0).into())]);
    }
    // With momentum (the buffer read from the second step on). As Adam's: outputs written in
    // place, operands cut to `n`, so the loop vectorizes.
    let mut outs = vec![alloc("optimizer step", n, T::default())?, alloc("optimizer step", n, T::default())?];
    let ins: Vec<&[T]> = v.iter().take(if first { 2 } else { 3 }).map(|x| &x[..n]).collect();
    in_pieces(&ins, &mut outs, move |ins, outs| {
        let n = ins[0].len();
        let (params, grads) = (&ins[0][..n], &ins[1][..n]);
        let bufs = if first { params } else { &ins[2][..n] };
        let [new_params, new_bufs] = outs else { unreachable!("two outputs") };
        let (new_params, new_bufs) = (&mut new_params[..n], &mut new_bufs[..n]);
        for i in 0..n {
            let param = params[i].widen();
            let mut g = if maximize { -grads[i].widen() } else { grads[i].widen() };
            if weight_decay != 0.0 {
                g = round(g + round(param * wd));
            }
            let buf = if first {
                g
            } else if dampening == 0.0 {
                round(round(bufs[i].widen() * mom) + g)
            } else {
                round(round(bufs[i].widen() * mom) + round(g * keep))
            };
            new_bufs[i] = T::narrow(buf);
            g = if nesterov { round(g + round(buf * mom)) } else { buf };
            new_params[i] = T::narrow(param - round(g * lr));
        }
    });
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}

/// The gradient every step but Adam's starts from: negated when maximizing, plus the L2 term.
fn l2_grad<T: Elem>(param: T::Acc, grad: T, maximize: bool, weight_decay: f64, wd: T::Acc) -> T::Acc {
    let g = if maximize { -grad.widen() } else { grad.widen() };
    if weight_decay != 0.0 {
        T::narrow(g + T::narrow(param * wd).widen()).widen()
    } else {
        g
    }
}

/// A hyper-parameter as the composite multiplies by it: a scalar of the dtype (so in f16 an
/// eps of 1e-8 is 0 there, and here).
fn scalar<T: Elem>(x: f64) -> T::Acc {
    T::narrow(acc::<T::Acc>(x)).widen()
}

/// `avg beta + a (value) b`, rounded after every operation as the composite's `decay_addcmul`.
fn decay_addcmul<T: Elem>(avg: T::Acc, beta: T::Acc, a: T::Acc, b: T::Acc, value: T::Acc) -> T::Acc {
    let round = |x: T::Acc| T::narrow(x).widen();
    round(round(avg * beta) + round(round(a * value) * b))
}

/// `FusedOp::RmsPropStep`: param, grad, square_avg[, momentum_buffer][, grad_avg] to their new
/// param, square_avg[, momentum_buffer][, grad_avg].
pub(crate) fn rmsprop_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::RmsPropStep(r) = op else { unreachable!("rmsprop_step is dispatched for RmsPropStep only") };
    let RmsPropStep { lr, alpha, eps, weight_decay, momentum, centered, maximize } = *r;
    let v = slices::<T>("rmsprop_step", inputs)?;
    let n = v[0].len();
    let (with_momentum, grad_avg_at) = (momentum > 0.0, 3 + (momentum > 0.0) as usize);
    let (wd, a, a_rest, mom, eps, neg_lr) =
        (scalar::<T>(weight_decay), scalar::<T>(alpha), scalar::<T>(1.0 - alpha), scalar::<T>(momentum), scalar::<T>(eps), scalar::<T>(-lr));
    // The composite's lerp weight `1 - alpha` and its complement, both from f64.
    let (w, w_rest) = (scalar::<T>(1.0 - alpha), scalar::<T>(1.0 - (1.0 - alpha)));
    let round = |x: T::Acc| T::narrow(x).widen();
    let low_weight = (1.0 - alpha).abs() < 0.5;
    // As Adam's: outputs written in place, operands cut to `n`, so the loop vectorizes; absent
    // optional state reads as `sqs`, and its output (as Adam's amsgrad one) is never written.
    let mut outs: Vec<Vec<T>> = (0..op.outputs()).map(|_| alloc("optimizer step", n, T::default())).collect::<Result<_>>()?;
    let ins: Vec<&[T]> = v.iter().map(|x| &x[..n]).collect();
    in_pieces(&ins, &mut outs, move |ins, outs| {
        let n = ins[0].len();
        let (params, grads, sqs) = (&ins[0][..n], &ins[1][..n], &ins[2][..n]);
        let bufs = if with_momentum { &ins[3][..n] } else { sqs };
        let avgs = if centered { &ins[grad_avg_at][..n] } else { sqs };
        let (new_params, rest) = outs.split_at_mut(1);
        let (new_sqs, rest) = rest.split_at_mut(1);
        let (new_bufs, new_avgs) = rest.split_at_mut(with_momentum as usize);
        let (new_params, new_sqs) = (&mut new_params[0][..n], &mut new_sqs[0][..n]);
        for i in 0..n {
            let param = params[i].widen();
            let g = l2_grad::<T>(param, grads[i], maximize, weight_decay, wd);
            let sq = decay_addcmul::<T>(sqs[i].widen(), a, g, g, a_rest);
            new_sqs[i] = T::narrow(sq);
            let mut avg = sq;
            if centered {
                let m0 = avgs[i].widen();
                let diff = round(g - m0);
                let m = if low_weight { round(m0 + round(diff * w)) } else { round(g - round(diff * w_rest)) };
                new_avgs[0][i] = T::narrow(m);
                avg = round(sq + round(-m * m));
            }
            let avg = round(round(avg.sqrt()) + eps);
            let mut step = round(g / avg);
            if with_momentum {
                step = round(round(bufs[i].widen() * mom) + step);
                new_bufs[0][i] = T::narrow(step);
            }
            new_params[i] = T::narrow(param + round(step * neg_lr));
        }
    });
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}

/// `FusedOp::AdagradStep`: param, grad, sum to their new param, sum.
pub(crate) fn adagrad_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::AdagradStep(a) = op else { unreachable!("adagrad_step is dispatched for AdagradStep only") };
    let AdagradStep { weight_decay, eps, maximize, .. } = *a;
    let v = slices::<T>("adagrad_step", inputs)?;
    let n = v[0].len();
    let (wd, eps, neg_clr) = (scalar::<T>(weight_decay), scalar::<T>(eps), scalar::<T>(-a.clr()));
    let round = |x: T::Acc| T::narrow(x).widen();
    // As Adam's: outputs written in place, operands cut to `n`, so the loop vectorizes.
    let mut outs = vec![alloc("optimizer step", n, T::default())?, alloc("optimizer step", n, T::default())?];
    let ins: Vec<&[T]> = v.iter().map(|x| &x[..n]).collect();
    in_pieces(&ins, &mut outs, move |ins, outs| {
        let n = ins[0].len();
        let (params, grads, sums) = (&ins[0][..n], &ins[1][..n], &ins[2][..n]);
        let [np, ns] = outs else { unreachable!("two outputs") };
        let (np, ns) = (&mut np[..n], &mut ns[..n]);
        for i in 0..n {
            let param = params[i].widen();
            let g = l2_grad::<T>(param, grads[i], maximize, weight_decay, wd);
            let sum = round(sums[i].widen() + round(g * g));
            let std = round(round(sum.sqrt()) + eps);
            np[i] = T::narrow(param + round(round(g / std) * neg_clr));
            ns[i] = T::narrow(sum);
        }
    });
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}

/// `FusedOp::AdadeltaStep`: param, grad, square_avg, acc_delta to their new param, square_avg,
/// acc_delta.
pub(crate) fn adadelta_step<T: Elem>(op: &FusedOp, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let FusedOp::AdadeltaStep(a) = op else { unreachable!("adadelta_step is dispatched for AdadeltaStep only") };
    let AdadeltaStep { lr, rho, eps, weight_decay, maximize } = *a;
    let v = slices::<T>("adadelta_step", inputs)?;
    let n = v[0].len();
    let (wd, rho, rho_rest, eps, neg_lr) = (scalar::<T>(weight_decay), scalar::<T>(rho), scalar::<T>(1.0 - rho), scalar::<T>(eps), scalar::<T>(-lr));
    let round = |x: T::Acc| T::narrow(x).widen();
    // As Adam's: outputs written in place, operands cut to `n`, so the loop vectorizes.
    let mut outs = vec![alloc("optimizer step", n, T::default())?, alloc("optimizer step", n, T::default())?, alloc("optimizer step", n, T::default())?];
    let ins: Vec<&[T]> = v.iter().map(|x| &x[..n]).collect();
    in_pieces(&ins, &mut outs, move |ins, outs| {
        let n = ins[0].len();
        let (params, grads, sqs, accs) = (&ins[0][..n], &ins[1][..n], &ins[2][..n], &ins[3][..n]);
        let [np, ns, na] = outs else { unreachable!("three outputs") };
        let (np, ns, na) = (&mut np[..n], &mut ns[..n], &mut na[..n]);
        for i in 0..n {
            let param = params[i].widen();
            let g = l2_grad::<T>(param, grads[i], maximize, weight_decay, wd);
            let sq = decay_addcmul::<T>(sqs[i].widen(), rho, g, g, rho_rest);
            let std = round(round(sq + eps).sqrt());
            let acc0 = accs[i].widen();
            let delta = round(round(round(round(acc0 + eps).sqrt()) / std) * g);
            np[i] = T::narrow(param + round(delta * neg_lr));
            ns[i] = T::narrow(sq);
            na[i] = T::narrow(decay_addcmul::<T>(acc0, rho, delta, delta, rho_rest));
        }
    });
    Ok(outs.into_iter().map(|v| T::wrap(v.into())).collect())
}
