//! Forward conformance of the unary elementwise ops, in every float dtype and on i64.

use super::forward::{check, expect_err, ref_erf, rounded};
use super::{from_values, positive_values, strided_input, values};
use crate::{DType, Device, Result, Tensor};

/// One unary op: its name, the tensor method, the f64 reference and whether it needs `x > 0`.
type Case = (&'static str, fn(&Tensor) -> Result<Tensor>, fn(f64) -> f64, bool);

fn cases() -> [Case; 15] {
    [
        ("neg", |t| t.neg(), |x| -x, false),
        ("abs", |t| t.abs(), f64::abs, false),
        (
            "sign",
            |t| t.sign(),
            |x| {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            },
            false,
        ),
        ("exp", |t| t.exp(), f64::exp, false),
        ("log", |t| t.log(), f64::ln, true),
        ("sqrt", |t| t.sqrt(), f64::sqrt, true),
        ("recip", |t| t.recip(), |x| 1.0 / x, false),
        ("sin", |t| t.sin(), f64::sin, false),
        ("cos", |t| t.cos(), f64::cos, false),
        ("erf", |t| t.erf(), ref_erf, false),
        ("floor", |t| t.floor(), f64::floor, false),
        ("ceil", |t| t.ceil(), f64::ceil, false),
        ("round", |t| t.round(), f64::round_ties_even, false),
        ("rsqrt", |t| t.rsqrt(), |x| 1.0 / x.sqrt(), true),
        ("square", |t| t.square(), |x| x * x, false),
    ]
}

/// Seeded inputs for a case: in `[0.05, 4]` when it needs positive ones, else `values * 2.5`
/// (so floor/ceil/round see several integers' worth of range).
fn case_values(n: usize, seed: u64, positive: bool) -> Vec<f64> {
    if positive {
        positive_values(n, seed, 0.05, 4.0)
    } else {
        values(n, seed).iter().map(|x| x * 2.5).collect()
    }
}

/// Runs every case on contiguous inputs of each `shape` and on a strided view, in `dtype`.
fn run_cases(d: &Device, dtype: DType, shapes: &[&[usize]], atol: f64, rtol: f64) {
    for (name, op, reference, positive) in cases() {
        for (k, &shape) in shapes.iter().enumerate() {
            let n: usize = shape.iter().product();
            let (t, v) = from_values(d, shape, &case_values(n, 20 + k as u64, positive), dtype);
            let want: Vec<f64> = v.iter().map(|&x| reference(x)).collect();
            let what = format!("{name} {dtype} {shape:?}");
            let got = op(&t);
            assert_eq!(got.as_ref().map(|g| g.dtype()).ok(), Some(dtype), "{what}: dtype");
            check(&what, &got, shape, &want, atol, rtol);
            if shape.len() >= 2 {
                let s = strided_input(d, shape, &v, dtype);
                check(&format!("{what} strided"), &op(&s), shape, &want, atol, rtol);
            }
        }
    }
}

pub fn unary(d: &Device) {
    run_cases(d, DType::F32, &[&[1], &[7], &[33], &[7, 33], &[3, 1001]], 1e-6, 1e-5);
    // A transposed and a narrowed input.
    let (t, v) = from_values(d, &[33, 7], &values(231, 30), DType::F32);
    let tv: Vec<f64> = (0..231).map(|f| v[(f % 33) * 7 + f / 33]).collect();
    check("exp of a transpose", &t.t().and_then(|x| x.exp()), &[7, 33], &tv.iter().map(|x| x.exp()).collect::<Vec<_>>(), 1e-6, 1e-5);
    let nv: Vec<f64> = (0..33 * 3).map(|f| v[(f / 3) * 7 + 2 + f % 3]).collect();
    check("sin of a narrow", &t.narrow(1, 2, 3).and_then(|x| x.sin()), &[33, 3], &nv.iter().map(|x| x.sin()).collect::<Vec<_>>(), 1e-6, 1e-5);
}

pub fn unary_special(d: &Device) {
    // Round half to even, as torch.round; floor and ceil around negative halves.
    let x = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -3.7, 4.0, -0.0, 1e7 + 0.5];
    let (t, xv) = from_values(d, &[x.len()], &x, DType::F64);
    let round: [f64; 12] = [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 4.0, -4.0, 4.0, -0.0, 1e7];
    check("round half to even", &t.round(), &[12], &round, 0.0, 0.0);
    let floor: Vec<f64> = xv.iter().map(|x| x.floor()).collect();
    check("floor", &t.floor(), &[12], &floor, 0.0, 0.0);
    let ceil: Vec<f64> = xv.iter().map(|x| x.ceil()).collect();
    check("ceil", &t.ceil(), &[12], &ceil, 0.0, 0.0);
    let (t32, _) = from_values(d, &[6], &[0.5, 1.5, 2.5, -0.5, -1.5, -2.5], DType::F32);
    check("round half to even f32", &t32.round(), &[6], &[0.0, 2.0, 2.0, -0.0, -2.0, -2.0], 0.0, 0.0);
    // sign of zero is zero; erf far out and near 0.
    let (z, _) = from_values(d, &[3], &[0.0, -2.0, 3.0], DType::F32);
    check("sign with a zero", &z.sign(), &[3], &[0.0, -1.0, 1.0], 0.0, 0.0);
    let e = [-6.5, -3.0, -0.5, 1e-3, 0.3, 1.0, 2.2, 4.0, 10.0];
    let (te, ev) = from_values(d, &[e.len()], &e, DType::F32);
    check("erf f32 wide range", &te.erf(), &[e.len()], &ev.iter().map(|&x| ref_erf(x)).collect::<Vec<_>>(), 1e-6, 1e-6);
    let (te, ev) = from_values(d, &[e.len()], &e, DType::F64);
    check("erf f64 wide range", &te.erf(), &[e.len()], &ev.iter().map(|&x| ref_erf(x)).collect::<Vec<_>>(), 1e-12, 1e-12);
    // Edges: log(0) = -inf, sqrt(-1) = NaN, recip(0) = inf, exp(-100) = 0 (not NaN).
    let (t, _) = from_values(d, &[2], &[0.0, -1.0], DType::F32);
    check("log at 0 and -1", &t.log(), &[2], &[f64::NEG_INFINITY, f64::NAN], 0.0, 0.0);
    check("sqrt at 0 and -1", &t.sqrt(), &[2], &[0.0, f64::NAN], 0.0, 0.0);
    check("recip at 0 and -1", &t.recip(), &[2], &[f64::INFINITY, -1.0], 0.0, 0.0);
    let (t, _) = from_values(d, &[2], &[-100.0, 80.0], DType::F32);
    check("exp at -100 and 80", &t.exp(), &[2], &[(-100f64).exp(), 80f64.exp()], 1e-40, 1e-6);
}

pub fn unary_int(d: &Device) {
    let t = Tensor::from_slice(&[-7i64, 0, 3, -1, 123_456_789_012, -9_007_199_254_740_993], &[6], d).unwrap();
    let neg = t.neg().unwrap();
    assert_eq!(neg.dtype(), DType::I64);
    // Compared as i64: the large value is not exact in f64.
    assert_eq!(neg.to_vec::<i64>().unwrap(), [7, 0, -3, 1, -123_456_789_012, 9_007_199_254_740_993], "neg i64");
    assert_eq!(t.abs().unwrap().to_vec::<i64>().unwrap(), [7, 0, 3, 1, 123_456_789_012, 9_007_199_254_740_993], "abs i64");
    assert_eq!(t.sign().unwrap().to_vec::<i64>().unwrap(), [-1, 0, 1, -1, 1, -1], "sign i64");
    // On a strided i64 view.
    let v: Vec<f64> = (0..21).map(|i| i as f64 - 10.0).collect();
    let s = strided_input(d, &[3, 7], &v, DType::I64);
    check("abs i64 strided", &s.abs(), &[3, 7], &v.iter().map(|x| x.abs()).collect::<Vec<_>>(), 0.0, 0.0);
    // Float-only functions refuse integers and bools.
    expect_err("exp of i64", t.exp());
    expect_err("sqrt of u8", Tensor::ones(&[2], DType::U8, d).unwrap().sqrt());
    expect_err("neg of bool", Tensor::ones(&[2], DType::Bool, d).unwrap().neg());
}

pub fn unary_dtypes(d: &Device) {
    // Outputs rounded to f16 carry a relative error near 5e-4, bf16 near 4e-3; references use
    // the inputs as the dtype stores them.
    run_cases(d, DType::F64, &[&[7], &[7, 33]], 1e-12, 1e-10);
    run_cases(d, DType::F16, &[&[7], &[7, 33]], 1e-3, 1e-2);
    run_cases(d, DType::BF16, &[&[7], &[7, 33]], 1e-2, 3e-2);
    // Rounding of the input itself is the only error in neg and abs.
    let v = rounded(&values(1001, 31), DType::F16);
    let (t, _) = from_values(d, &[1001], &v, DType::F16);
    check("neg f16 1001", &t.neg(), &[1001], &v.iter().map(|x| -x).collect::<Vec<_>>(), 0.0, 0.0);
}
