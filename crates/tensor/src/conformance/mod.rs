//! The backend conformance suite: one set of tests, generic over the device, that every backend
//! runs unchanged from its own test crate:
//!
//! ```ignore
//! liandan_tensor::conformance_suite!(liandan_tensor::Device::cpu());
//! // or, for a backend that may find no device here: an expression giving Option<Device>
//! liandan_tensor::conformance_suite!(my_backend_tests::gpu());
//! ```
//!
//! Forward results are compared with independent float64 reference code written on plain
//! `Vec<f64>` ([`forward`]); every backward rule is compared with central finite differences
//! in float64 ([`grads`]). Inputs are seeded, never zero, and cover broadcasting,
//! non-contiguous views and odd sizes (1, 7, 33, 1000+). Tolerances are written at each call.

pub mod custom;
pub mod e2e;
pub mod forward;
pub mod forward_attention;
pub mod forward_binary;
pub mod forward_compare;
pub mod forward_conv;
pub mod forward_create;
pub mod forward_index;
pub mod forward_loss;
pub mod forward_matmul;
pub mod forward_nn;
pub mod forward_pool;
pub mod forward_reduce;
pub mod forward_unary;
pub mod forward_views;
pub mod fused;
pub mod fused_conv;
pub mod fused_norm;
pub mod grads;
pub mod grads_elementwise;
pub mod grads_join;
pub mod grads_nn;
pub mod grads_reduce;
pub mod grads_views;
pub mod grads_window;
pub mod profile;
mod suite;

use crate::{DType, Device, Result, Tensor};

/// Seeded values in `[-2, -0.1] U [0.1, 2]`: never zero, so relative errors mean something and
/// kinks (relu, abs) are not hit exactly.
pub fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n as u32)
        .map(|i| {
            let u = crate::rng::uniform01(seed, i) as f64;
            let mag = 0.1 + 1.9 * (crate::rng::uniform01(seed ^ 0xa5a5, i) as f64);
            if u < 0.5 {
                -mag
            } else {
                mag
            }
        })
        .collect()
}

/// Seeded positive values in `[lo, hi]` (for log, sqrt, pow bases, divisors).
pub fn positive_values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    (0..n as u32).map(|i| lo + (hi - lo) * crate::rng::uniform01(seed, i) as f64).collect()
}

/// A tensor of `shape` holding `values(.., seed)` in `dtype`, and those values as rounded by
/// the dtype (what the reference should compute from).
pub fn input(device: &Device, shape: &[usize], seed: u64, dtype: DType) -> (Tensor, Vec<f64>) {
    let v = values(shape.iter().product(), seed);
    from_values(device, shape, &v, dtype)
}

/// A tensor of `values` in `dtype`, and the values as that dtype stores them.
pub fn from_values(device: &Device, shape: &[usize], values: &[f64], dtype: DType) -> (Tensor, Vec<f64>) {
    let t = Tensor::from_f64s(values, shape, dtype, device).expect("conformance: creating an input");
    let rounded = crate::dtype::bytes_to_f64(&crate::dtype::f64_to_bytes(values, dtype), dtype);
    (t, rounded)
}

/// A non-contiguous view of logical `shape` holding `values`: the data sits transposed in a
/// wider buffer and is narrowed and permuted back, so strides and offset are all non-trivial.
pub fn strided_input(device: &Device, shape: &[usize], values: &[f64], dtype: DType) -> Tensor {
    assert!(!shape.is_empty(), "strided_input needs rank >= 1");
    let rank = shape.len();
    // Storage layout: reversed axes, with the (reversed) first axis padded by 2 on each side.
    let mut rev: Vec<usize> = shape.iter().rev().copied().collect();
    rev[0] += 3;
    let n: usize = rev.iter().product();
    let mut buf = vec![0.5; n];
    let rev_strides = crate::layout::contiguous_strides(&rev);
    let logical = crate::Layout::contiguous(shape);
    for (flat, _) in logical.indices().enumerate() {
        // multi-index of `flat` in `shape`
        let mut rem = flat;
        let mut idx = vec![0; rank];
        for d in (0..rank).rev() {
            idx[d] = rem % shape[d];
            rem /= shape[d];
        }
        let mut pos = 0;
        for (k, &i) in idx.iter().rev().enumerate() {
            let i = if k == 0 { i + 2 } else { i };
            pos += i * rev_strides[k];
        }
        buf[pos] = values[flat];
    }
    let base = Tensor::from_f64s(&buf, &rev, dtype, device).expect("conformance: strided base");
    let narrowed = base.narrow(0usize, 2, shape[rank - 1]).expect("conformance: narrow");
    let perm: Vec<usize> = (0..rank).rev().collect();
    let view = narrowed.permute(&perm).expect("conformance: permute");
    assert!(rank == 1 || !view.is_contiguous() || shape.iter().filter(|&&d| d > 1).count() < 2);
    view
}

/// Asserts `|got - want| <= atol + rtol * |want|` elementwise (NaNs must match), naming the
/// check and the first offending element.
#[track_caller]
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: got {} values, want {}", got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})");
    }
}

/// Reads a tensor back as f64, panicking with `what` on failure.
#[track_caller]
pub fn read(what: &str, t: &Result<Tensor>) -> Vec<f64> {
    match t {
        Ok(t) => t.to_vec_f64().unwrap_or_else(|e| panic!("{what}: read-back failed: {e}")),
        Err(e) => panic!("{what}: op failed: {e}"),
    }
}

/// What a suite runs on: a [`Device`], or `None` when the backend has no device here (each
/// test then returns at once; the backend's test file prints why, and refuses to skip when
/// `LIANDAN_REQUIRE_GPU` is set).
pub trait SuiteDevice {
    fn resolve(self) -> Option<Device>;
}

impl SuiteDevice for Device {
    fn resolve(self) -> Option<Device> {
        Some(self)
    }
}

impl SuiteDevice for Option<Device> {
    fn resolve(self) -> Option<Device> {
        self
    }
}

/// Resolves the device a suite test runs on (see [`SuiteDevice`]).
pub fn suite_device(d: impl SuiteDevice) -> Option<Device> {
    d.resolve()
}
