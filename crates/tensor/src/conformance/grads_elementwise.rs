//! Gradient checks of the elementwise ops: unary functions, broadcasting binary ops and their
//! scalar forms, clamp, select and dtype casts.

use super::grads::{check_grads, leaf, positive_leaf, strided_leaf};
use super::{assert_close, strided_input, values};
use crate::{DType, Device, Tensor};

pub fn neg_abs(d: &Device) {
    check_grads("neg", &[leaf(d, &[33], 1)], |x| x[0].neg(), 1e-7, 1e-6);
    // values() keeps |x| >= 0.1, away from abs's kink.
    check_grads("abs", &[leaf(d, &[33], 2)], |x| x[0].abs(), 1e-7, 1e-6);
    check_grads("abs strided", &[strided_leaf(d, &[7, 3], 3)], |x| x[0].abs(), 1e-7, 1e-6);
}

pub fn exp_log(d: &Device) {
    check_grads("exp", &[leaf(d, &[33], 4)], |x| x[0].exp(), 1e-6, 1e-6);
    check_grads("exp strided", &[strided_leaf(d, &[3, 7], 5)], |x| x[0].exp(), 1e-6, 1e-6);
    check_grads("log", &[positive_leaf(d, &[33], 6, 0.2, 3.0)], |x| x[0].log(), 1e-6, 1e-5);
    check_grads("log [1]", &[positive_leaf(d, &[1], 7, 0.2, 3.0)], |x| x[0].log(), 1e-6, 1e-5);
}

pub fn sqrt_rsqrt(d: &Device) {
    check_grads("sqrt", &[positive_leaf(d, &[33], 8, 0.2, 3.0)], |x| x[0].sqrt(), 1e-6, 1e-5);
    check_grads("rsqrt", &[positive_leaf(d, &[7, 3], 9, 0.2, 3.0)], |x| x[0].rsqrt(), 1e-6, 1e-5);
}

pub fn recip_square(d: &Device) {
    // |x| >= 0.1, so 1/x is smooth over the finite-difference step.
    check_grads("recip", &[leaf(d, &[33], 10)], |x| x[0].recip(), 1e-5, 1e-5);
    check_grads("square", &[strided_leaf(d, &[5, 7], 11)], |x| x[0].square(), 1e-7, 1e-6);
}

pub fn sin_cos(d: &Device) {
    check_grads("sin", &[leaf(d, &[33], 12)], |x| x[0].sin(), 1e-7, 1e-6);
    check_grads("cos", &[strided_leaf(d, &[3, 7], 13)], |x| x[0].cos(), 1e-7, 1e-6);
}

pub fn erf(d: &Device) {
    check_grads("erf", &[leaf(d, &[33], 14)], |x| x[0].erf(), 1e-7, 1e-6);
}

/// sign, floor, ceil and round are piecewise constant: their gradient is exactly zero (finite
/// differences across a jump would be meaningless, so none are taken).
pub fn piecewise_constant(d: &Device) {
    let w = leaf(d, &[7, 5], 99);
    for (name, seed) in [("sign", 15), ("floor", 16), ("ceil", 17), ("round", 18)] {
        let v: Vec<f64> = values(35, seed).iter().map(|v| 3.0 * v).collect();
        let x = strided_input(d, &[7, 5], &v, DType::F64).requires_grad_(true).unwrap();
        let y = match name {
            "sign" => x.sign(),
            "floor" => x.floor(),
            "ceil" => x.ceil(),
            _ => x.round(),
        }
        .unwrap();
        assert!(y.requires_grad(), "{name}: the result is recorded");
        y.mul(&w).and_then(|l| l.sum_all()).and_then(|l| l.backward()).unwrap_or_else(|e| panic!("{name}: backward failed: {e}"));
        let g = x.grad().unwrap_or_else(|| panic!("{name}: no gradient")).to_vec_f64().unwrap();
        assert_close(&format!("{name}: gradient is zero"), &g, &[0.0; 35], 0.0, 0.0);
    }
}

pub fn add_broadcast(d: &Device) {
    let a = leaf(d, &[3, 1, 5], 1);
    let b = leaf(d, &[4, 5], 2);
    check_grads("add broadcast", &[a, b], |x| x[0].add(&x[1]), 1e-7, 1e-6);
    let (a, b) = (strided_leaf(d, &[7, 1], 19), leaf(d, &[1], 20));
    check_grads("add strided + [1]", &[a, b], |x| x[0].add(&x[1]), 1e-7, 1e-6);
}

pub fn sub_mul(d: &Device) {
    let (a, b) = (leaf(d, &[3, 1, 5], 21), strided_leaf(d, &[4, 5], 22));
    check_grads("sub broadcast", &[a, b], |x| x[0].sub(&x[1]), 1e-7, 1e-6);
    let (a, b) = (strided_leaf(d, &[2, 3, 4], 23), leaf(d, &[3, 1], 24));
    check_grads("mul broadcast", &[a, b], |x| x[0].mul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[1], 25), leaf(d, &[33], 26));
    check_grads("mul [1] x [33]", &[a, b], |x| x[0].mul(&x[1]), 1e-7, 1e-6);
}

pub fn div(d: &Device) {
    let (a, b) = (leaf(d, &[4, 7], 27), positive_leaf(d, &[7], 28, 0.5, 2.0));
    check_grads("div broadcast rhs", &[a, b], |x| x[0].div(&x[1]), 1e-6, 1e-5);
    // Negative divisors too: |b| >= 0.1, and b's row repeats 5 times, hence 1e-5.
    let (a, b) = (leaf(d, &[3, 1], 29), strided_leaf(d, &[3, 5], 30));
    check_grads("div broadcast lhs, strided rhs", &[a, b], |x| x[0].div(&x[1]), 1e-5, 1e-5);
}

pub fn pow(d: &Device) {
    let (a, b) = (positive_leaf(d, &[3, 4], 31, 0.5, 2.0), leaf(d, &[4], 32));
    check_grads("pow (base and exponent)", &[a, b], |x| x[0].pow(&x[1]), 1e-6, 1e-5);
    let (a, b) = (positive_leaf(d, &[7], 33, 0.5, 2.0), leaf(d, &[2, 1], 34));
    check_grads("pow broadcast exponent", &[a, b], |x| x[0].pow(&x[1]), 1e-6, 1e-5);
}

pub fn maximum_minimum(d: &Device) {
    // Independent seeded values: no ties (nor near-ties within the step).
    let (a, b) = (leaf(d, &[4, 7], 35), leaf(d, &[7], 36));
    check_grads("maximum broadcast", &[a.clone(), b.clone()], |x| x[0].maximum(&x[1]), 1e-7, 1e-6);
    check_grads("minimum broadcast", &[a, b], |x| x[0].minimum(&x[1]), 1e-7, 1e-6);
    let (a, b) = (strided_leaf(d, &[5, 3], 37), leaf(d, &[5, 1], 38));
    check_grads("maximum strided", &[a.clone(), b.clone()], |x| x[0].maximum(&x[1]), 1e-7, 1e-6);
    check_grads("minimum strided", &[a, b], |x| x[0].minimum(&x[1]), 1e-7, 1e-6);
}

pub fn scalar_ops(d: &Device) {
    let x = leaf(d, &[33], 39);
    check_grads("add_scalar", std::slice::from_ref(&x), |x| x[0].add_scalar(0.7), 1e-7, 1e-6);
    check_grads("sub_scalar", std::slice::from_ref(&x), |x| x[0].sub_scalar(-1.3), 1e-7, 1e-6);
    check_grads("mul_scalar", std::slice::from_ref(&x), |x| x[0].mul_scalar(-2.5), 1e-7, 1e-6);
    check_grads("div_scalar", std::slice::from_ref(&x), |x| x[0].div_scalar(0.3), 1e-6, 1e-6);
    // Thresholds 0.05 and -0.05 lie inside the gap (-0.1, 0.1) values() leaves empty: no ties.
    check_grads("maximum_scalar", std::slice::from_ref(&x), |x| x[0].maximum_scalar(0.05), 1e-7, 1e-6);
    check_grads("minimum_scalar", &[x], |x| x[0].minimum_scalar(-0.05), 1e-7, 1e-6);
    check_grads("pow_scalar", &[positive_leaf(d, &[7, 3], 40, 0.5, 2.0)], |x| x[0].pow_scalar(2.5), 1e-6, 1e-5);
    check_grads("pow_scalar negative", &[positive_leaf(d, &[7], 41, 0.5, 2.0)], |x| x[0].pow_scalar(-1.5), 1e-5, 1e-5);
}

pub fn clamp(d: &Device) {
    // Seeded values in [-2, 2] hit both bounds; none is within the step of +-1.
    check_grads("clamp", &[leaf(d, &[33], 42)], |x| x[0].clamp(-1.0, 1.0), 1e-7, 1e-6);
    check_grads("clamp strided", &[strided_leaf(d, &[7, 5], 43)], |x| x[0].clamp(-0.5, 1.5), 1e-7, 1e-6);
}

pub fn where_cond(d: &Device) {
    let cond = leaf(d, &[1, 5], 44).gt_scalar(0.0).unwrap();
    let (a, b) = (leaf(d, &[3, 5], 45), strided_leaf(d, &[3, 1], 46));
    check_grads("where (broadcast cond and branch)", &[a, b], move |x| Tensor::where_cond(&cond, &x[0], &x[1]), 1e-7, 1e-6);
    let cond = leaf(d, &[4, 7], 47).lt_scalar(0.0).unwrap();
    let (a, b) = (leaf(d, &[7], 48), leaf(d, &[4, 7], 49));
    check_grads("where (mixed)", &[a, b], move |x| Tensor::where_cond(&cond, &x[0].exp()?, &x[1].square()?), 1e-6, 1e-6);
}

/// A cast passes the gradient through, cast back to the input's dtype: for an upstream
/// gradient exactly representable in f32, `x.to_dtype(F32).to_dtype(F64)` gets it unchanged.
/// (Finite differences through f32 rounding would measure the rounding, not the rule.)
pub fn to_dtype(d: &Device) {
    let g: Vec<f64> = values(33, 50).iter().map(|&v| v as f32 as f64).collect();
    let g64 = Tensor::from_f64s(&g, &[33], DType::F64, d).unwrap();
    let g32 = Tensor::from_f64s(&g, &[33], DType::F32, d).unwrap();
    for x in [leaf(d, &[33], 51), strided_leaf(d, &[33], 52)] {
        let x = x.requires_grad_(true).unwrap();
        let round_trip = x.to_dtype(DType::F32).and_then(|y| y.to_dtype(DType::F64)).unwrap();
        assert_eq!(round_trip.dtype(), DType::F64);
        round_trip.backward_with(&g64, false).unwrap();
        let got = x.grad().expect("round trip: a gradient");
        assert_eq!(got.dtype(), DType::F64, "the gradient has the leaf's dtype");
        assert_close("to_dtype F64->F32->F64", &got.to_vec_f64().unwrap(), &g, 0.0, 0.0);
        x.set_grad(None);

        let y32 = x.to_dtype(DType::F32).unwrap();
        y32.backward_with(&g32, false).unwrap();
        let got = x.grad().expect("cast to F32: a gradient");
        assert_eq!(got.dtype(), DType::F64, "the gradient has the leaf's dtype");
        assert_close("to_dtype F64->F32", &got.to_vec_f64().unwrap(), &g, 0.0, 0.0);
    }
}
