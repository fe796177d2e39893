//! Forward conformance of `scaled_dot_product_attention` against a direct softmax over
//! host vectors: masks (bool, additive, causal), broadcast batches, and its shape errors.

use super::forward::{broadcast_ravel, check, expect_err, expect_shapes_err, unravel};
use super::{input, strided_input};
use crate::{DType, Device, Tensor};

/// Attention over `[B, L, E]`, `[B, S, E]`, `[B, S, Ev]` (batch already broadcast), with an
/// additive mask `[B, L, S]` (`-inf` drops a key).
fn ref_attention(q: &[f64], k: &[f64], v: &[f64], mask: &[f64], (b, l, s, e, ev): (usize, usize, usize, usize, usize), scale: f64) -> Vec<f64> {
    let mut out = vec![0.0; b * l * ev];
    for bi in 0..b {
        for i in 0..l {
            let scores: Vec<f64> =
                (0..s).map(|j| (0..e).map(|t| q[(bi * l + i) * e + t] * k[(bi * s + j) * e + t]).sum::<f64>() * scale + mask[(bi * l + i) * s + j]).collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let ex: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = ex.iter().sum();
            for t in 0..ev {
                out[(bi * l + i) * ev + t] = (0..s).map(|j| ex[j] / z * v[(bi * s + j) * ev + t]).sum();
            }
        }
    }
    out
}

/// The values of a tensor of `shape` broadcast to `to` (both host-side).
fn bcast(v: &[f64], shape: &[usize], to: &[usize]) -> Vec<f64> {
    (0..to.iter().product()).map(|f| v[broadcast_ravel(&unravel(f, to), shape)]).collect()
}

pub fn attention(d: &Device) {
    let (h, l, s, e, ev) = (2usize, 5usize, 7usize, 3usize, 4usize);
    let (q, qv) = input(d, &[2, h, l, e], 690, DType::F32);
    let (k, kv) = input(d, &[2, h, s, e], 691, DType::F32);
    // Values shared by the heads: [2, 1, S, Ev] broadcasts over H.
    let (v, vv) = input(d, &[2, 1, s, ev], 692, DType::F32);
    let vb = bcast(&vv, &[2, 1, s, ev], &[2, h, s, ev]);
    let dims = (2 * h, l, s, e, ev);
    let oshape = [2, h, l, ev];
    let scale = 1.0 / (e as f64).sqrt();
    let none = vec![0.0; 2 * h * l * s];
    check("attention", &q.scaled_dot_product_attention(&k, &v, None, false, None), &oshape, &ref_attention(&qv, &kv, &vb, &none, dims, scale), 1e-5, 1e-5);
    let sq = strided_input(d, &[2, h, l, e], &qv, DType::F32);
    check(
        "attention strided, scale 0.7",
        &sq.scaled_dot_product_attention(&k, &v, None, false, Some(0.7)),
        &oshape,
        &ref_attention(&qv, &kv, &vb, &none, dims, 0.7),
        1e-5,
        1e-5,
    );
    // Causal: key j <= query i.
    let causal: Vec<f64> = (0..2 * h * l * s).map(|f| if f % s <= (f / s) % l { 0.0 } else { f64::NEG_INFINITY }).collect();
    check(
        "attention causal",
        &q.scaled_dot_product_attention(&k, &v, None, true, None),
        &oshape,
        &ref_attention(&qv, &kv, &vb, &causal, dims, scale),
        1e-5,
        1e-5,
    );
    // A bool [L, S] mask broadcast over batch and heads (every query keeps key 0).
    let keep: Vec<bool> = (0..l * s).map(|f| f % s == 0 || (f * 7 + 3) % 5 < 3).collect();
    let bm = Tensor::from_f64s(&keep.iter().map(|&b| b as u8 as f64).collect::<Vec<_>>(), &[l, s], DType::Bool, d).unwrap();
    let add: Vec<f64> = keep.iter().map(|&b| if b { 0.0 } else { f64::NEG_INFINITY }).collect();
    let want = ref_attention(&qv, &kv, &vb, &bcast(&add, &[l, s], &[2, h, l, s]), dims, scale);
    check("attention bool mask [L, S]", &q.scaled_dot_product_attention(&k, &v, Some(&bm), false, None), &oshape, &want, 1e-5, 1e-5);
    // A float [2, 1, L, S] mask, added.
    let (fm, fv) = input(d, &[2, 1, l, s], 693, DType::F32);
    let want = ref_attention(&qv, &kv, &vb, &bcast(&fv, &[2, 1, l, s], &[2, h, l, s]), dims, scale);
    check("attention float mask [2, 1, L, S]", &q.scaled_dot_product_attention(&k, &v, Some(&fm), false, None), &oshape, &want, 1e-5, 1e-5);
    // 2-D operands, L > S with a causal mask (every query row keeps key 0).
    let (q2, q2v) = input(d, &[7, 3], 694, DType::F64);
    let (k2, k2v) = input(d, &[4, 3], 695, DType::F64);
    let (v2, v2v) = input(d, &[4, 2], 696, DType::F64);
    let c2: Vec<f64> = (0..28).map(|f| if f % 4 <= f / 4 { 0.0 } else { f64::NEG_INFINITY }).collect();
    let want = ref_attention(&q2v, &k2v, &v2v, &c2, (1, 7, 4, 3, 2), 1.0 / 3f64.sqrt());
    check("attention 2-D causal f64", &q2.scaled_dot_product_attention(&k2, &v2, None, true, None), &[7, 2], &want, 1e-12, 1e-12);
    // Errors name the shapes.
    let bad_k = Tensor::zeros(&[2, h, s, e + 1], DType::F32, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&bad_k, &v, None, false, None), &[2, h, l, e], &[2, h, s, e + 1]);
    let bad_v = Tensor::zeros(&[2, 1, s + 1, ev], DType::F32, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&k, &bad_v, None, false, None), &[2, h, s, e], &[2, 1, s + 1, ev]);
    let bad_m = Tensor::zeros(&[l, s + 1], DType::Bool, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&k, &v, Some(&bad_m), false, None), &[2, h, l, s], &[l, s + 1]);
    expect_err("attention mask with is_causal", q.scaled_dot_product_attention(&k, &v, Some(&bm), true, None));
    let bad_b = Tensor::zeros(&[3, h, s, e], DType::F32, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&bad_b, &v, None, false, None), &[2, h, l, e], &[3, h, s, e]);
}

/// Attention under autocast: in f16 its probabilities in f16 from one kernel where the device
/// has it (f32 inside, as PyTorch's attention under autocast), in bf16 the softmax in f32
/// between casts, each against the softmax in f32 between casts with fusion off: the output in
/// the low type and the inputs' gradients within that type's rounding, with a causal mask.
pub fn attention_under_autocast(d: &Device) {
    let leaf =
        |shape: &[usize], seed| Tensor::from_f64s(&super::values(shape.iter().product(), seed), shape, DType::F32, d).unwrap().requires_grad_(true).unwrap();
    let (q, k, v) = (leaf(&[2, 5, 8], 60), leaf(&[2, 7, 8], 61), leaf(&[2, 7, 3], 62));
    let w = Tensor::from_f64s(&super::values(2 * 5 * 3, 63), &[2, 5, 3], DType::F32, d).unwrap();
    for (low, tol) in [(DType::F16, 1e-2), (DType::BF16, 6e-2)] {
        for causal in [false, true] {
            let (q, k, v) = if causal { (leaf(&[2, 7, 8], 64), k.clone(), v.clone()) } else { (q.clone(), k.clone(), v.clone()) };
            let w = if causal { Tensor::from_f64s(&super::values(2 * 7 * 3, 65), &[2, 7, 3], DType::F32, d).unwrap() } else { w.clone() };
            let run = || {
                [&q, &k, &v].iter().for_each(|t| t.set_grad(None));
                let out = crate::autocast(low, || q.scaled_dot_product_attention(&k, &v, None, causal, None)).unwrap();
                assert_eq!(out.dtype(), low, "attention under autocast computes in {low}");
                out.to_dtype(DType::F32).unwrap().mul(&w).unwrap().sum_all().unwrap().backward().unwrap();
                let mut seen = vec![out.to_vec_f64().unwrap()];
                seen.extend([&q, &k, &v].iter().map(|t| t.grad().unwrap().to_vec_f64().unwrap()));
                seen
            };
            let got = run();
            let want = crate::no_fusion(run);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                super::assert_close(&format!("attention in {low} (causal {causal}): output, then dq, dk, dv: {i}"), g, w, tol, tol);
            }
        }
    }
}
