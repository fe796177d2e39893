//! Forward results against independent float64 reference code on plain `Vec<f64>`: the list of
//! forward tests and the index arithmetic the `forward_*` files share.
//!
//! Reference code never calls a tensor op: expected values come from loops over host vectors,
//! computed from the inputs as their dtype stores them.

use super::assert_close;
use crate::{DType, Result, Tensor};

/// Row-major multi-index of element `flat` of `shape`.
pub fn unravel(flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    let mut rem = flat;
    for d in (0..shape.len()).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    idx
}

/// Row-major position of `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

/// Position in `shape` of the element that broadcasting maps to `idx` of a result of equal or
/// higher rank (shapes right-aligned, size-1 axes repeated).
pub fn broadcast_ravel(idx: &[usize], shape: &[usize]) -> usize {
    let lead = idx.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (i, &s)| acc * s + if s == 1 { 0 } else { idx[lead + i] })
}

/// The broadcast of two shapes (the caller only passes compatible ones).
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let get = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank).map(|i| get(a, i).max(get(b, i))).collect()
}

/// `f(a, b)` elementwise with broadcasting; returns the values and the result shape.
pub fn ref_zip(a: &[f64], ash: &[usize], b: &[f64], bsh: &[usize], f: impl Fn(f64, f64) -> f64) -> (Vec<f64>, Vec<usize>) {
    let shape = broadcast_shape(ash, bsh);
    let n: usize = shape.iter().product();
    let out = (0..n)
        .map(|flat| {
            let idx = unravel(flat, &shape);
            f(a[broadcast_ravel(&idx, ash)], b[broadcast_ravel(&idx, bsh)])
        })
        .collect();
    (out, shape)
}

/// Applies `f` to the values of each group that reducing `dims` of `shape` merges (each group in
/// row-major order of the reduced axes); returns the results and the keepdim shape.
pub fn ref_reduce(v: &[f64], shape: &[usize], dims: &[usize], f: impl Fn(&[f64]) -> f64) -> (Vec<f64>, Vec<usize>) {
    let mut keep = shape.to_vec();
    for &d in dims {
        keep[d] = 1;
    }
    let mut groups = vec![Vec::new(); keep.iter().product()];
    for (flat, &x) in v.iter().enumerate() {
        let mut idx = unravel(flat, shape);
        for &d in dims {
            idx[d] = 0;
        }
        groups[ravel(&idx, &keep)].push(x);
    }
    (groups.iter().map(|g| f(g)).collect(), keep)
}

/// `keep` with the axes in `dims` removed (the shape of a reduction without keepdim).
pub fn drop_dims(keep: &[usize], dims: &[usize]) -> Vec<usize> {
    keep.iter().enumerate().filter(|(i, _)| !dims.contains(i)).map(|(_, &s)| s).collect()
}

/// The Gauss error function to ~1e-15, from `erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) /
/// (2n+1)!!`, whose terms are all positive (no cancellation, unlike the Taylor series).
pub fn ref_erf(x: f64) -> f64 {
    let a = x.abs();
    if a > 6.0 {
        return x.signum();
    }
    let (mut term, mut sum, mut n) = (a, a, 0.0);
    while term > 1e-17 * sum {
        n += 1.0;
        term *= 2.0 * a * a / (2.0 * n + 1.0);
        sum += term;
    }
    x.signum() * 2.0 / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum
}

/// `v` as `dtype` stores it (host-side rounding, for references on reduced-precision outputs).
pub fn rounded(v: &[f64], dtype: DType) -> Vec<f64> {
    crate::dtype::bytes_to_f64(&crate::dtype::f64_to_bytes(v, dtype), dtype)
}

/// Asserts that an op succeeded with `shape` and values close to `want`.
#[track_caller]
pub fn check(what: &str, got: &Result<Tensor>, shape: &[usize], want: &[f64], atol: f64, rtol: f64) {
    let t = match got {
        Ok(t) => t,
        Err(e) => panic!("{what}: op failed: {e}"),
    };
    assert_eq!(t.shape(), shape, "{what}: shape");
    let v = t.to_vec_f64().unwrap_or_else(|e| panic!("{what}: read-back failed: {e}"));
    assert_close(what, &v, want, atol, rtol);
}

/// Asserts that `r` is an error and returns its message.
#[track_caller]
pub fn expect_err<T>(what: &str, r: Result<T>) -> String {
    match r {
        Ok(_) => panic!("{what}: expected an error, got Ok"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `r` failed with a message naming `op` and both shapes.
#[track_caller]
pub fn expect_shapes_err<T>(op: &str, r: Result<T>, a: &[usize], b: &[usize]) {
    let msg = expect_err(op, r);
    for want in [op.to_string(), format!("{a:?}"), format!("{b:?}")] {
        assert!(msg.contains(&want), "{op}: the error {msg:?} does not name {want}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_reference_matches_known_values() {
        // erf(0.5), erf(1), erf(2), erf(3) to 16 digits (DLMF tables).
        for (x, want) in [(0.5, 0.520_499_877_813_046_5), (1.0, 0.842_700_792_949_714_9), (2.0, 0.995_322_265_018_952_7), (3.0, 0.999_977_909_503_001_4)] {
            assert!((ref_erf(x) - want).abs() < 1e-14 && (ref_erf(-x) + want).abs() < 1e-14, "erf({x}) = {}", ref_erf(x));
        }
    }
}
