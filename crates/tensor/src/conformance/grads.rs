//! Backward rules against central finite differences in float64: the harness, the test list,
//! and the autograd engine's own semantics (accumulation, no_grad, detach, freed graphs).
//!
//! The checks themselves live by op family in `grads_elementwise`, `grads_views`,
//! `grads_reduce`, `grads_window` and `grads_nn`.

use super::{assert_close, positive_values, strided_input, values};
use crate::{no_grad, DType, Device, Result, Tensor};

/// Checks the gradient of `sum(f(inputs) * w)` (seeded `w`) for every input against central
/// differences with step `1e-6`. `inputs` are f64 leaves (any layout); index tensors and other
/// constants are captured by `f`.
#[track_caller]
pub fn check_grads(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>, atol: f64, rtol: f64) {
    let device = inputs[0].device().clone();
    for x in inputs {
        assert_eq!(x.dtype(), DType::F64, "{what}: gradient checks run in f64");
        x.set_grad(None);
        x.set_requires_grad(true).expect("leaf");
    }
    let out = f(inputs).unwrap_or_else(|e| panic!("{what}: forward failed: {e}"));
    let w = Tensor::from_f64s(&values(out.numel(), 0xbeef), out.shape(), DType::F64, &device).unwrap();
    let loss = |o: &Tensor| -> Result<Tensor> { o.mul(&w)?.sum_all() };
    loss(&out).and_then(|l| l.backward()).unwrap_or_else(|e| panic!("{what}: backward failed: {e}"));

    let host: Vec<Vec<f64>> = inputs.iter().map(|x| x.to_vec_f64().unwrap()).collect();
    let eval = |k: usize, j: usize, delta: f64| -> f64 {
        no_grad(|| {
            let perturbed: Vec<Tensor> = inputs
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    if i != k {
                        return x.detach();
                    }
                    let mut v = host[i].clone();
                    v[j] += delta;
                    Tensor::from_f64s(&v, x.shape(), DType::F64, &device).unwrap()
                })
                .collect();
            loss(&f(&perturbed).unwrap()).unwrap().item_f64().unwrap()
        })
    };
    const EPS: f64 = 1e-6;
    for (k, x) in inputs.iter().enumerate() {
        let analytic = x.grad().unwrap_or_else(|| panic!("{what}: input {k} received no gradient")).to_vec_f64().unwrap();
        let numeric: Vec<f64> = (0..x.numel()).map(|j| (eval(k, j, EPS) - eval(k, j, -EPS)) / (2.0 * EPS)).collect();
        assert_close(&format!("{what}: d/d(input {k})"), &analytic, &numeric, atol, rtol);
        x.set_requires_grad(false).unwrap();
        x.set_grad(None);
    }
}

/// An f64 leaf of `shape` with seeded non-zero values.
pub fn leaf(device: &Device, shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F64, device).unwrap()
}

/// An f64 leaf of `shape` with seeded values in `[lo, hi]`.
pub fn positive_leaf(device: &Device, shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    Tensor::from_f64s(&positive_values(shape.iter().product(), seed, lo, hi), shape, DType::F64, device).unwrap()
}

/// A non-contiguous f64 leaf (see [`strided_input`]): built without grad, so it is a leaf.
pub fn strided_leaf(device: &Device, shape: &[usize], seed: u64) -> Tensor {
    strided_input(device, shape, &values(shape.iter().product(), seed), DType::F64)
}

/// An i64 index tensor.
pub fn index(device: &Device, idx: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(idx, shape, device).unwrap()
}

// ---- autograd engine semantics ------------------------------------------------------------

/// `sum(x * c)` has gradient `c`.
fn linear_loss(x: &Tensor, c: &Tensor) -> Tensor {
    x.mul(c).and_then(|y| y.sum_all()).expect("forward")
}

fn grad_of(x: &Tensor) -> Vec<f64> {
    x.grad().expect("a gradient").to_vec_f64().unwrap()
}

/// Gradients add up across backward calls until cleared with `set_grad(None)`.
pub fn accumulates(d: &Device) {
    let x = leaf(d, &[7], 1).requires_grad_(true).unwrap();
    let c = leaf(d, &[7], 2);
    let cv = c.to_vec_f64().unwrap();
    linear_loss(&x, &c).backward().unwrap();
    assert_close("first backward", &grad_of(&x), &cv, 0.0, 0.0);
    linear_loss(&x, &c).backward().unwrap();
    let twice: Vec<f64> = cv.iter().map(|v| 2.0 * v).collect();
    assert_close("second backward accumulates", &grad_of(&x), &twice, 1e-15, 1e-15);
    x.set_grad(None);
    assert!(x.grad().is_none(), "set_grad(None) clears");
    linear_loss(&x, &c).backward().unwrap();
    assert_close("after clearing", &grad_of(&x), &cv, 0.0, 0.0);
}

/// Nothing computed under `no_grad` is recorded; recording resumes after.
pub fn no_grad_records_nothing(d: &Device) {
    let x = leaf(d, &[7], 3).requires_grad_(true).unwrap();
    let y = no_grad(|| {
        assert!(!crate::is_grad_enabled());
        x.exp().and_then(|e| e.mul(&x))
    })
    .unwrap();
    assert!(!y.requires_grad() && y.is_leaf(), "no_grad result must not be recorded");
    assert!(crate::is_grad_enabled(), "grad mode restored after no_grad");
    assert!(y.sum_all().unwrap().backward().is_err(), "backward through an unrecorded result must error");
    assert!(x.mul_scalar(2.0).unwrap().requires_grad(), "recording resumes");
}

/// `detach()` cuts the graph: `sum(detach(x) * x)` has gradient `x`, not `2x`.
pub fn detach_cuts_graph(d: &Device) {
    let x = leaf(d, &[33], 4).requires_grad_(true).unwrap();
    let xd = x.detach();
    assert!(!xd.requires_grad() && xd.is_leaf());
    linear_loss(&x, &xd).backward().unwrap();
    assert_close("d/dx sum(detach(x) * x)", &grad_of(&x), &x.to_vec_f64().unwrap(), 0.0, 0.0);
}

/// A second backward through a freed graph is an error, not a panic; `retain_graph` allows it.
pub fn freed_graph_and_retain(d: &Device) {
    let x = leaf(d, &[7], 5).requires_grad_(true).unwrap();
    let xv = x.to_vec_f64().unwrap();
    let loss = x.square().and_then(|s| s.sum_all()).unwrap();
    loss.backward().unwrap();
    assert!(loss.backward().is_err(), "second backward through a freed graph must be an error");
    x.set_grad(None);

    let loss = x.square().and_then(|s| s.sum_all()).unwrap();
    let one = loss.ones_like().unwrap();
    loss.backward_with(&one, true).unwrap();
    loss.backward_with(&one, true).unwrap();
    let want: Vec<f64> = xv.iter().map(|v| 4.0 * v).collect();
    assert_close("two retained backwards of sum(x^2)", &grad_of(&x), &want, 1e-14, 1e-14);
}

/// A tensor used twice gets both contributions.
pub fn used_twice(d: &Device) {
    let x = leaf(d, &[7, 3], 6);
    check_grads("x * x", std::slice::from_ref(&x), |x| x[0].mul(&x[0]), 1e-7, 1e-6);
    check_grads("x + x * sin(x)", &[x], |x| x[0].add(&x[0].mul(&x[0].sin()?)?), 1e-7, 1e-6);
}

/// Backward on a non-scalar, on a tensor that needs no grad, or with a misshapen gradient errors.
pub fn backward_errors(d: &Device) {
    let x = leaf(d, &[7], 7).requires_grad_(true).unwrap();
    let y = x.mul_scalar(2.0).unwrap();
    assert!(y.backward().is_err(), "backward on a [7] tensor must error");
    assert!(y.backward_with(&leaf(d, &[6], 8), false).is_err(), "a gradient of the wrong shape must error");
    assert!(leaf(d, &[], 9).backward().is_err(), "backward on a tensor that requires no grad must error");
    assert!(y.set_requires_grad(false).is_err(), "only leaves can change requires_grad");
    assert!(x.grad().is_none(), "failed backwards leave no gradient");
}

/// 5000 successive ops backpropagate without overflowing the stack.
pub fn deep_chain(d: &Device) {
    let x = leaf(d, &[7], 10).requires_grad_(true).unwrap();
    let mut y = x.clone();
    for _ in 0..5000 {
        y = y.add_scalar(1e-3).unwrap();
    }
    linear_loss(&y, &y.ones_like().unwrap()).backward().unwrap();
    assert_close("d/dx of a 5000-op chain", &grad_of(&x), &[1.0; 7], 0.0, 0.0);
}
