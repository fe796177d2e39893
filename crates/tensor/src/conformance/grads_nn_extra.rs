//! Gradient checks of the nn-layer composites and the added losses against central finite
//! differences in f64. Each composite's gradient comes from its primitives' rules; these
//! checks catch a wrong composition (a transpose, a reshape, a mask).

use super::grads::{check_grads, index, leaf, positive_leaf, strided_leaf};
use crate::{CrossEntropyOptions, DType, Device, KlReduction, Reduction, Tensor};

const REDUCTIONS: [Reduction; 3] = [Reduction::None, Reduction::Mean, Reduction::Sum];

pub fn conv1d(d: &Device) {
    let (x, w, b) = (leaf(d, &[2, 4, 9], 1), leaf(d, &[6, 2, 3], 2), leaf(d, &[6], 3));
    check_grads("conv1d s2 p1 d2 g2", &[x, w, b], |x| x[0].conv1d(&x[1], Some(&x[2]), 2, 1, 2, 2), 1e-6, 1e-6);
    let (x, w) = (strided_leaf(d, &[1, 3, 7], 4), strided_leaf(d, &[2, 3, 4], 5));
    check_grads("conv1d strided, no bias", &[x, w], |x| x[0].conv1d(&x[1], None, 1, 2, 1, 1), 1e-6, 1e-6);
}

pub fn conv_transpose2d(d: &Device) {
    // Stride 2, padding 1, output_padding 1, 2 groups: [2, 4, 3, 3] -> [2, 6, 6, 6].
    let (x, w, b) = (leaf(d, &[2, 4, 3, 3], 6), leaf(d, &[4, 3, 3, 3], 7), leaf(d, &[6], 8));
    check_grads("conv_transpose2d s2 p1 op1 g2", &[x, w, b], |x| x[0].conv_transpose2d(&x[1], Some(&x[2]), (2, 2), (1, 1), (1, 1), (1, 1), 2), 1e-6, 1e-6);
    let (x, w) = (strided_leaf(d, &[1, 2, 4, 3], 9), strided_leaf(d, &[2, 3, 2, 3], 10));
    check_grads("conv_transpose2d strided, dilated, uneven", &[x, w], |x| x[0].conv_transpose2d(&x[1], None, (1, 2), (0, 1), (1, 1), (2, 1), 1), 1e-6, 1e-6);
}

pub fn adaptive_pools(d: &Device) {
    // 7x5 -> 3x2: overlapping, uneven bins on both axes; 6x4 -> 3x2 takes the pooling fast path.
    for (shape, out) in [([2usize, 2, 7, 5], (3usize, 2usize)), ([1, 3, 6, 4], (3, 2)), ([1, 2, 6, 5], (3, 4))] {
        check_grads(&format!("adaptive_avg_pool2d {shape:?} -> {out:?}"), &[leaf(d, &shape, 11)], |x| x[0].adaptive_avg_pool2d(out), 1e-7, 1e-6);
        // Seeded values have no ties, so each bin's maximum is unique.
        check_grads(&format!("adaptive_max_pool2d {shape:?} -> {out:?}"), &[strided_leaf(d, &shape, 12)], |x| x[0].adaptive_max_pool2d(out), 1e-7, 1e-6);
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

pub fn embedding(d: &Device) {
    // Repeated indices accumulate into the same row.
    let idx = index(d, &[3, 0, 6, 3, 1, 3], &[2, 3]);
    check_grads("embedding", &[leaf(d, &[7, 4], 17)], move |x| idx.embedding(&x[0]), 1e-7, 1e-6);
    let idx = index(d, &[2], &[]);
    check_grads("embedding scalar index, strided weight", &[strided_leaf(d, &[5, 3], 18)], move |x| idx.embedding(&x[0])?.square(), 1e-7, 1e-6);
}

pub fn dropout2d(d: &Device) {
    check_grads("dropout2d p 0.5", &[leaf(d, &[3, 4, 2, 3], 19)], |x| x[0].dropout2d(0.5, true, Some(77)), 1e-7, 1e-6);
    check_grads("dropout2d eval", &[leaf(d, &[1, 2, 2, 2], 20)], |x| x[0].dropout2d(0.5, false, None)?.sin(), 1e-7, 1e-6);
}

pub fn linear(d: &Device) {
    let (x, w, b) = (leaf(d, &[2, 3, 5], 21), leaf(d, &[4, 5], 22), leaf(d, &[4], 23));
    check_grads("linear [2, 3, 5]", &[x, w, b], |x| x[0].linear(&x[1], Some(&x[2])), 1e-7, 1e-6);
    let (x, w) = (leaf(d, &[5], 24), strided_leaf(d, &[3, 5], 25));
    check_grads("linear 1-D input, strided weight", &[x, w], |x| x[0].linear(&x[1], None), 1e-7, 1e-6);
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
