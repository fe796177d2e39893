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
    ]
}

/// Operand lists for `op`: `count` tensors of mixed sizes, each list its parameter, gradient
/// and state (the state positive, as second moments are).
fn lists(op: &FusedOp, count: usize, dtype: DType, device: &Device) -> Vec<Vec<Tensor>> {
    let shapes: [&[usize]; 7] = [&[1], &[3], &[256], &[7, 37], &[17], &[2, 3], &[600]];
    (0..count)
        .map(|i| {
            let shape = shapes[i % shapes.len()];
            (0..op.updates().len() + 1)
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
    let width = op.updates().len() + 1;
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

/// Whether `device` runs `op` over many tensors at once in `dtype` (checking the result).
pub fn backend_runs_foreach(device: &Device, op: &FusedOp, dtype: DType) -> bool {
    check(device, op, dtype, 3, false)
}
