//! Gradient checks of the composites: activations, softmax family, normalization, dropout,
//! attention and losses (each under every `Reduction`). A composite's gradient comes from its
//! primitives' rules; these checks catch a wrong composition (a transpose, a reshape, a mask).

use super::grads::{check_grads, index, leaf, positive_leaf, strided_leaf};
use crate::{CrossEntropyOptions, DType, Device, KlReduction, Reduction, Tensor};

const REDUCTIONS: [Reduction; 3] = [Reduction::None, Reduction::Mean, Reduction::Sum];

pub fn relu_leaky_relu(d: &Device) {
    // values() keeps |x| >= 0.1, away from the kink.
    check_grads("relu", &[leaf(d, &[33], 1)], |x| x[0].relu(), 1e-7, 1e-6);
    check_grads("relu strided", &[strided_leaf(d, &[7, 3], 2)], |x| x[0].relu(), 1e-7, 1e-6);
    check_grads("leaky_relu", &[strided_leaf(d, &[7, 5], 3)], |x| x[0].leaky_relu(0.1), 1e-7, 1e-6);
}

pub fn sigmoid_tanh(d: &Device) {
    check_grads("sigmoid", &[leaf(d, &[33], 4)], |x| x[0].sigmoid(), 1e-7, 1e-6);
    check_grads("tanh", &[strided_leaf(d, &[7, 5], 5)], |x| x[0].tanh(), 1e-7, 1e-6);
    // Scaled to |x| up to 40: the closed-form rules stay finite where the tails saturate.
    check_grads("sigmoid saturating", &[leaf(d, &[33], 6)], |x| x[0].mul_scalar(20.0)?.sigmoid(), 1e-6, 1e-5);
    check_grads("tanh saturating", &[leaf(d, &[33], 7)], |x| x[0].mul_scalar(20.0)?.tanh(), 1e-6, 1e-5);
}

pub fn gelu_silu_softplus(d: &Device) {
    check_grads("gelu", &[leaf(d, &[33], 8)], |x| x[0].gelu(), 1e-7, 1e-6);
    check_grads("silu", &[strided_leaf(d, &[7, 3], 9)], |x| x[0].silu(), 1e-7, 1e-6);
    check_grads("softplus", &[leaf(d, &[33], 10)], |x| x[0].softplus(), 1e-7, 1e-6);
    check_grads("softplus strided, scaled", &[strided_leaf(d, &[5, 7], 11)], |x| x[0].mul_scalar(10.0)?.softplus(), 1e-6, 1e-5);
    // At exactly 0 the stable form's kinks must not leak into the gradient (sigmoid(0) = 0.5).
    let zeros = || Tensor::from_f64s(&[0.0, 0.0, 1.5, -2.0], &[4], DType::F64, d).unwrap();
    check_grads("softplus at 0", &[zeros()], |x| x[0].softplus(), 1e-7, 1e-6);
    let target = Tensor::from_f64s(&[0.0, 1.0, 0.3, 1.0], &[4], DType::F64, d).unwrap();
    check_grads("bce_with_logits at 0", &[zeros()], |x| x[0].bce_with_logits(&target, Reduction::Sum), 1e-7, 1e-6);
}

pub fn logsumexp(d: &Device) {
    check_grads("logsumexp dim 1", &[leaf(d, &[4, 7], 12)], |x| x[0].logsumexp(1usize, false), 1e-7, 1e-6);
    check_grads("logsumexp dim 0 keepdim, strided", &[strided_leaf(d, &[5, 3], 13)], |x| x[0].logsumexp(0usize, true), 1e-7, 1e-6);
    check_grads("logsumexp [1]", &[leaf(d, &[1], 14)], |x| x[0].logsumexp(-1isize, false), 1e-7, 1e-6);
}

pub fn softmax(d: &Device) {
    let x = leaf(d, &[5, 7], 15);
    check_grads("softmax dim 0", std::slice::from_ref(&x), |x| x[0].softmax(0usize), 1e-7, 1e-6);
    check_grads("softmax dim -1", &[x], |x| x[0].softmax(-1isize), 1e-7, 1e-6);
    check_grads("softmax middle dim, strided", &[strided_leaf(d, &[3, 7, 5], 16)], |x| x[0].softmax(1usize), 1e-7, 1e-6);
}

pub fn log_softmax(d: &Device) {
    let x = leaf(d, &[5, 7], 17);
    check_grads("log_softmax dim 0", std::slice::from_ref(&x), |x| x[0].log_softmax(0usize), 1e-7, 1e-6);
    check_grads("log_softmax dim -1", &[x], |x| x[0].log_softmax(-1isize), 1e-7, 1e-6);
    check_grads("log_softmax middle dim, strided", &[strided_leaf(d, &[3, 7, 5], 18)], |x| x[0].log_softmax(1usize), 1e-7, 1e-6);
}

pub fn layer_norm(d: &Device) {
    let (x, w, b) = (leaf(d, &[3, 7], 19), leaf(d, &[7], 20), leaf(d, &[7], 21));
    check_grads("layer_norm last dim", &[x, w, b], |x| x[0].layer_norm(1, Some(&x[1]), Some(&x[2]), 1e-5), 1e-6, 1e-5);
    let (x, w, b) = (strided_leaf(d, &[2, 3, 5], 22), leaf(d, &[3, 5], 23), strided_leaf(d, &[3, 5], 24));
    check_grads("layer_norm last 2 dims, strided", &[x, w, b], |x| x[0].layer_norm(2, Some(&x[1]), Some(&x[2]), 1e-5), 1e-6, 1e-5);
    check_grads("layer_norm no affine", &[leaf(d, &[4, 33], 25)], |x| x[0].layer_norm(1, None, None, 1e-5), 1e-6, 1e-5);
}

/// Training mode normalizes with batch statistics; the running statistics are passed (and
/// updated in place on every forward, harmlessly) but are not inputs of the check.
pub fn batch_norm_train(d: &Device) {
    let (rm, rv) = (leaf(d, &[3], 26), positive_leaf(d, &[3], 27, 0.5, 2.0));
    let (x, w, b) = (leaf(d, &[4, 3, 5], 28), leaf(d, &[3], 29), leaf(d, &[3], 30));
    check_grads(
        "batch_norm train [N, C, L]",
        &[x, w, b],
        move |x| x[0].batch_norm(Some(&rm), Some(&rv), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5),
        1e-6,
        1e-5,
    );
    let (x, w) = (strided_leaf(d, &[2, 3, 2, 3], 31), leaf(d, &[3], 32));
    check_grads("batch_norm train [N, C, H, W] strided, no stats", &[x, w], |x| x[0].batch_norm(None, None, Some(&x[1]), None, true, 0.1, 1e-5), 1e-6, 1e-5);
}

pub fn batch_norm_eval(d: &Device) {
    let (rm, rv) = (leaf(d, &[3], 33), positive_leaf(d, &[3], 34, 0.5, 2.0));
    let (x, w, b) = (leaf(d, &[4, 3, 5], 35), leaf(d, &[3], 36), leaf(d, &[3], 37));
    check_grads("batch_norm eval", &[x, w, b], move |x| x[0].batch_norm(Some(&rm), Some(&rv), Some(&x[1]), Some(&x[2]), false, 0.1, 1e-5), 1e-7, 1e-6);
}

/// With a fixed seed the mask is the same on every forward, so finite differences apply.
pub fn dropout(d: &Device) {
    check_grads("dropout p 0.3", &[leaf(d, &[7, 5], 38)], |x| x[0].dropout(0.3, true, Some(1234)), 1e-7, 1e-6);
    check_grads("dropout p 0.5 strided", &[strided_leaf(d, &[33], 39)], |x| x[0].dropout(0.5, true, Some(99))?.square(), 1e-7, 1e-6);
    check_grads("dropout eval", &[leaf(d, &[7], 40)], |x| x[0].dropout(0.5, false, None)?.sin(), 1e-7, 1e-6);
}

pub fn cross_entropy_nll(d: &Device) {
    let targets: Tensor = index(d, &[3, 0, 6, 3, 1], &[5]);
    for r in REDUCTIONS {
        let t = targets.clone();
        check_grads(&format!("cross_entropy {r:?}"), &[leaf(d, &[5, 7], 41)], move |x| x[0].cross_entropy(&t, r), 1e-7, 1e-6);
        let t = targets.clone();
        check_grads(&format!("nll_loss {r:?}"), &[strided_leaf(d, &[5, 7], 42)], move |x| x[0].nll_loss(&t, r), 1e-7, 1e-6);
    }
    let t = index(d, &[0], &[1]);
    check_grads("cross_entropy [1, 1]", &[leaf(d, &[1, 1], 43)], move |x| x[0].cross_entropy(&t, Reduction::Mean), 1e-7, 1e-6);
}

/// Gradients go to both prediction and target.
pub fn mse_bce(d: &Device) {
    for r in REDUCTIONS {
        let (p, t) = (leaf(d, &[4, 7], 44), strided_leaf(d, &[4, 7], 45));
        check_grads(&format!("mse_loss {r:?}"), &[p, t], |x| x[0].mse_loss(&x[1], r), 1e-7, 1e-6);
        let (p, t) = (leaf(d, &[4, 7], 46), positive_leaf(d, &[4, 7], 47, 0.05, 0.95));
        check_grads(&format!("bce_with_logits {r:?}"), &[p, t], |x| x[0].bce_with_logits(&x[1], r), 1e-7, 1e-6);
    }
}

pub fn group_norm(d: &Device) {
    let (x, w, b) = (leaf(d, &[2, 6, 5], 13), leaf(d, &[6], 14), leaf(d, &[6], 15));
    check_grads("group_norm [2, 6, 5] groups 3", &[x, w, b], |x| x[0].group_norm(3, Some(&x[1]), Some(&x[2]), 1e-5), 1e-6, 1e-5);
    check_grads(
        "group_norm [2, 4, 2, 3] strided, groups 2, no affine",
        &[strided_leaf(d, &[2, 4, 2, 3], 16)],
        |x| x[0].group_norm(2, None, None, 1e-5),
        1e-6,
        1e-5,
    );
}

pub fn dropout2d(d: &Device) {
    check_grads("dropout2d p 0.5", &[leaf(d, &[3, 4, 2, 3], 19)], |x| x[0].dropout2d(0.5, true, Some(77)), 1e-7, 1e-6);
    check_grads("dropout2d eval", &[leaf(d, &[1, 2, 2, 2], 20)], |x| x[0].dropout2d(0.5, false, None)?.sin(), 1e-7, 1e-6);
}

pub fn attention(d: &Device) {
    let (q, k, v) = (leaf(d, &[2, 5, 3], 26), leaf(d, &[2, 4, 3], 27), leaf(d, &[2, 4, 2], 28));
    check_grads("attention", &[q.clone(), k.clone(), v.clone()], |x| x[0].scaled_dot_product_attention(&x[1], &x[2], None, false, None), 1e-7, 1e-6);
    check_grads("attention causal", &[q.clone(), k.clone(), v.clone()], |x| x[0].scaled_dot_product_attention(&x[1], &x[2], None, true, Some(0.8)), 1e-7, 1e-6);
    let keep: Vec<f64> = (0..20).map(|f| (f % 4 == 0 || f % 3 == 1) as u8 as f64).collect();
    let mask = Tensor::from_f64s(&keep, &[5, 4], DType::Bool, d).unwrap();
    check_grads(
        "attention bool mask",
        &[q.clone(), k.clone(), v.clone()],
        move |x| x[0].scaled_dot_product_attention(&x[1], &x[2], Some(&mask), false, None),
        1e-7,
        1e-6,
    );
    // The additive float mask gets a gradient too.
    check_grads(
        "attention float mask",
        &[strided_leaf(d, &[2, 5, 3], 29), k, v, leaf(d, &[1, 5, 4], 30)],
        |x| x[0].scaled_dot_product_attention(&x[1], &x[2], Some(&x[3]), false, None),
        1e-7,
        1e-6,
    );
}

pub fn l1_bce_kl(d: &Device) {
    for r in REDUCTIONS {
        // values() of two seeds: |x - y| stays well away from the kink at 0.
        let (x, y) = (leaf(d, &[4, 7], 31), strided_leaf(d, &[4, 7], 32));
        check_grads(&format!("l1_loss {r:?}"), &[x, y], |x| x[0].l1_loss(&x[1], r), 1e-7, 1e-6);
        let (p, t) = (positive_leaf(d, &[4, 7], 33, 0.05, 0.95), positive_leaf(d, &[4, 7], 34, 0.0, 1.0));
        check_grads(&format!("bce_loss {r:?}"), &[p, t], |x| x[0].bce_loss(&x[1], r), 1e-7, 1e-6);
        for log_target in [false, true] {
            let (x, t) = (leaf(d, &[3, 5], 35), positive_leaf(d, &[3, 5], 36, 0.05, 1.0));
            check_grads(&format!("kl_div {r:?} log_target={log_target}"), &[x, t], move |x| x[0].kl_div(&x[1], r, log_target), 1e-7, 1e-6);
        }
    }
    let (x, t) = (leaf(d, &[3, 5], 37), positive_leaf(d, &[3, 5], 38, 0.05, 1.0));
    check_grads("kl_div batchmean", &[x, t], |x| x[0].kl_div(&x[1], KlReduction::BatchMean, false), 1e-7, 1e-6);
}

pub fn cross_entropy_with(d: &Device) {
    let targets = index(d, &[3, -100, 6, 3, 1, 0], &[6]);
    for r in REDUCTIONS {
        // Gradients to the logits and to the class weights, with every option at once.
        let t = targets.clone();
        let f = move |x: &[Tensor]| {
            let opts = CrossEntropyOptions { weight: Some(&x[1]), ignore_index: Some(-100), label_smoothing: 0.2 };
            x[0].cross_entropy_with(&t, opts, r)
        };
        check_grads(&format!("cross_entropy_with all options {r:?}"), &[leaf(d, &[6, 7], 39), positive_leaf(d, &[7], 40, 0.2, 2.0)], f, 1e-7, 1e-6);
        let t = targets.clone();
        check_grads(
            &format!("nll_loss_with {r:?}"),
            &[strided_leaf(d, &[6, 7], 41), positive_leaf(d, &[7], 42, 0.2, 2.0)],
            move |x| x[0].nll_loss_with(&t, Some(&x[1]), Some(-100), r),
            1e-7,
            1e-6,
        );
    }
    let t = index(d, &[0, 2, 1, 1, 2, 0], &[2, 3]);
    let opts = CrossEntropyOptions { ignore_index: Some(1), label_smoothing: 0.1, ..Default::default() };
    check_grads("cross_entropy_with [N, C, d]", &[strided_leaf(d, &[2, 3, 3], 43)], move |x| x[0].cross_entropy_with(&t, opts, Reduction::Mean), 1e-7, 1e-6);
}
