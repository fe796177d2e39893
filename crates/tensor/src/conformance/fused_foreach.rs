//! Multi-tensor updates ([`update_foreach`]) against the per-tensor updates they stand for
//! ([`update`], each of which liandan-train's `fused_optim` test checks against its
//! composite): where the device has a multi-tensor kernel, every parameter and state tensor
//! must come out bit for bit as the per-tensor updates leave it; where it has none, the call
//! must change nothing. Over every update op and option set, in every float dtype but f64, on
//! tensors of mixed sizes (one element, a few, exactly one 256-wide workgroup, more than one)
//! and more of them than one dispatch takes; with buffers of their own (which a backend may
//! update in place) and with a shared one (which it must not).

use super::values;
use crate::fused::{update, update_foreach};
use crate::{AdadeltaStep, AdagradStep, AdamStep, DType, Device, FusedOp, RmsPropStep, SgdStep, Tensor};

/// Every update op with each option that changes its kernel or its arithmetic.
pub fn ops() -> Vec<FusedOp> {
    let adam =
        AdamStep { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, step: 3, amsgrad: false, maximize: false, decoupled_weight_decay: false };
    let sgd = SgdStep { lr: 0.1, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false, maximize: false, first: false };
    let rms = RmsPropStep { lr: 1e-2, alpha: 0.99, eps: 1e-4, weight_decay: 0.0, momentum: 0.0, centered: false, maximize: false };
    vec![
        FusedOp::AdamStep(adam),
        FusedOp::AdamStep(AdamStep { amsgrad: true, weight_decay: 0.1, ..adam }),
        FusedOp::AdamStep(AdamStep { decoupled_weight_decay: true, weight_decay: 0.01, maximize: true, beta1: 0.3, ..adam }),
        FusedOp::SgdStep(sgd),
        FusedOp::SgdStep(SgdStep { momentum: 0.9, first: true, weight_decay: 0.01, ..sgd }),
        FusedOp::SgdStep(SgdStep { momentum: 0.9, dampening: 0.3, maximize: true, ..sgd }),
        FusedOp::SgdStep(SgdStep { momentum: 0.8, nesterov: true, ..sgd }),
        FusedOp::RmsPropStep(rms),
        FusedOp::RmsPropStep(RmsPropStep { momentum: 0.9, weight_decay: 0.01, ..rms }),
        FusedOp::RmsPropStep(RmsPropStep { centered: true, maximize: true, ..rms }),
        FusedOp::RmsPropStep(RmsPropStep { momentum: 0.5, centered: true, alpha: 0.3, ..rms }),
        FusedOp::AdagradStep(AdagradStep { lr: 0.1, lr_decay: 0.01, weight_decay: 0.01, eps: 1e-8, step: 2, maximize: false }),
        FusedOp::AdadeltaStep(AdadeltaStep { lr: 0.5, rho: 0.8, eps: 1e-5, weight_decay: 0.01, maximize: true }),
        FusedOp::Scale(1.0 / 3.0),
    ]
}

/// The operands one update of `op` takes: the updated tensors and, for an optimizer's step,
/// the gradient (input 1).
fn operands(op: &FusedOp) -> usize {
    match op {
        FusedOp::Scale(_) => 1,
        _ => op.updates().len() + 1,
    }
}

/// Operand lists for `op`: `count` tensors of mixed sizes, each list its parameter, gradient
/// and state (the state positive, as second moments are).
fn lists(op: &FusedOp, count: usize, dtype: DType, device: &Device) -> Vec<Vec<Tensor>> {
    let shapes: [&[usize]; 7] = [&[1], &[3], &[256], &[7, 37], &[17], &[2, 3], &[600]];
    (0..count)
        .map(|i| {
            let shape = shapes[i % shapes.len()];
            (0..operands(op))
                .map(|k| {
                    let v: Vec<f64> = values(shape.iter().product(), (100 * i + k) as u64).iter().map(|x| if k == 1 { *x } else { x.abs() + 0.1 }).collect();
                    Tensor::from_f64s(&v, shape, dtype, device).unwrap()
                })
                .collect()
        })
        .collect()
}

/// Every tensor's values, NaN as a fixed pattern so that equal NaNs compare equal.
fn snapshot(lists: &[Vec<Tensor>]) -> Vec<Vec<u64>> {
    lists.iter().flatten().map(|t| t.to_vec_f64().unwrap().iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect()).collect()
}

/// Runs `op` over `count` operand lists with [`update_foreach`]; `true` if the device ran it,
/// after checking the result against the per-tensor updates (see the module docs). With
/// `alias`, the first list's updated tensors are shared (a detached alias of each is held):
/// the call that takes that list must leave the aliases their old values (the update cannot
/// go in place there), and the later calls may update in place.
fn check(device: &Device, op: &FusedOp, dtype: DType, count: usize, alias: bool) -> bool {
    let what = format!("{} {dtype} over {count} tensors on {device}", op.name());
    let per_tensor = lists(op, count, dtype, device);
    for list in &per_tensor {
        let refs: Vec<&Tensor> = list.iter().collect();
        update(op, &refs).unwrap_or_else(|| panic!("{what}: the per-tensor update did not run")).unwrap();
    }
    let together = lists(op, count, dtype, device);
    let before = snapshot(&together);
    let aliases: Vec<Tensor> = if alias { op.updates().iter().map(|&k| together[0][k].detach()).collect() } else { Vec::new() };
    let refs: Vec<Vec<&Tensor>> = together.iter().map(|l| l.iter().collect()).collect();
    let ran = update_foreach(op, &refs).unwrap_or_else(|e| panic!("{what}: {e}"));
    let after = snapshot(&together);
    let want = snapshot(&per_tensor);
    let width = operands(op);
    for (k, got) in after.iter().enumerate() {
        let (list, expected) = if ran[k / width] { ("updated", &want[k]) } else { ("not updated", &before[k]) };
        assert!(got == expected, "{what}: tensor {k} ({list}) differs from the per-tensor update's result or its old value");
    }
    assert!(ran.iter().all(|&r| r) || ran.iter().all(|&r| !r), "{what}: some lists ran and some did not: {ran:?}");
    for (alias, &k) in aliases.iter().zip(&op.updates()) {
        let kept = snapshot(&[vec![alias.clone()]]);
        assert!(kept[0] == before[k], "{what}: an alias of updated tensor {k} changed: a shared buffer was written in place");
    }
    ran[0]
}

/// [`update_foreach`] against the per-tensor updates, for every op of [`ops`].
pub fn matches_per_tensor(device: &Device) {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for op in ops() {
            check(device, &op, dtype, 30, false);
            check(device, &op, dtype, 30, true);
        }
    }
}

/// [`FusedOp::Scale`] against its oracle, [`Tensor::mul_scalar`], bit for bit, in every float
/// dtype but f64, with factors every dtype holds exactly (the loss scaler's 2^-16, and -2.5) and
/// one each rounds (1/3), where the device runs it per tensor ([`update`]) and over many at once
/// ([`update_foreach`]; also checked against [`update`] by [`matches_per_tensor`]).
pub fn scale_matches_mul_scalar(device: &Device) {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for factor in [1.0 / 65536.0, 1.0 / 3.0, -2.5] {
            let what = format!("scale by {factor} in {dtype} on {device}");
            let make = |seed: u64| Tensor::from_f64s(&values(600, seed), &[600], dtype, device).unwrap();
            let want = make(7).mul_scalar(factor).unwrap().to_vec_f64().unwrap();
            let one = make(7);
            if let Some(done) = update(&FusedOp::Scale(factor), &[&one]) {
                done.unwrap();
                assert_eq!(one.to_vec_f64().unwrap(), want, "{what}: the per-tensor kernel");
            }
            let many = [make(7), make(7)];
            let lists: Vec<Vec<&Tensor>> = many.iter().map(|t| vec![t]).collect();
            let ran = update_foreach(&FusedOp::Scale(factor), &lists).unwrap();
            for (t, ran) in many.iter().zip(ran) {
                if ran {
                    assert_eq!(t.to_vec_f64().unwrap(), want, "{what}: the multi-tensor kernel");
                }
            }
        }
    }
}

/// Whether `device` runs `op` over many tensors at once in `dtype` (checking the result).
pub fn backend_runs_foreach(device: &Device, op: &FusedOp, dtype: DType) -> bool {
    check(device, op, dtype, 3, false)
}
