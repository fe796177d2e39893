//! Forward conformance of comparisons, `where_cond` and dtype casts.

use half::{bf16, f16};

use super::forward::{check, expect_err, ref_zip, rounded};
use super::{from_values, strided_input, values};
use crate::{Bool8, DType, Device, Result, Tensor};

type Cmp = (&'static str, fn(&Tensor, &Tensor) -> Result<Tensor>, fn(f64, f64) -> bool);

fn comparisons() -> [Cmp; 6] {
    [
        ("eq", |a, b| a.eq(b), |x, y| x == y),
        ("ne", |a, b| a.ne(b), |x, y| x != y),
        ("lt", |a, b| a.lt(b), |x, y| x < y),
        ("le", |a, b| a.le(b), |x, y| x <= y),
        ("gt", |a, b| a.gt(b), |x, y| x > y),
        ("ge", |a, b| a.ge(b), |x, y| x >= y),
    ]
}

/// `fresh` with every third element replaced by `other`'s (so ties occur where they line up).
fn with_ties(fresh: Vec<f64>, other: &[f64]) -> Vec<f64> {
    fresh.iter().enumerate().map(|(i, &x)| if i % 3 == 0 { other[i % other.len()] } else { x }).collect()
}

pub fn compare(d: &Device) {
    for dtype in [DType::F32, DType::F64, DType::F16, DType::I64] {
        for (ash, bsh) in [(&[7usize, 33][..], &[7usize, 33][..]), (&[7, 1], &[33]), (&[1], &[1]), (&[3, 1001], &[3, 1001])] {
            let (na, nb): (usize, usize) = (ash.iter().product(), bsh.iter().product());
            // Integers in [-6, 6] for i64.
            let prep = |v: Vec<f64>| if dtype == DType::I64 { v.iter().map(|x| (x * 3.0).round()).collect() } else { v };
            let (b, bv) = from_values(d, bsh, &prep(values(nb, 71)), dtype);
            let (a, av) = from_values(d, ash, &with_ties(prep(values(na, 70)), &bv), dtype);
            let sa = strided_input(d, ash, &av, dtype);
            for (name, op, reference) in comparisons() {
                let (want, shape) = ref_zip(&av, ash, &bv, bsh, |x, y| reference(x, y) as u8 as f64);
                let what = format!("{name} {dtype} {ash:?} {bsh:?}");
                let got = op(&a, &b);
                assert_eq!(got.as_ref().map(|t| t.dtype()).ok(), Some(DType::Bool), "{what}: result dtype");
                check(&what, &got, &shape, &want, 0.0, 0.0);
                check(&format!("{what} strided lhs"), &op(&sa, &b), &shape, &want, 0.0, 0.0);
            }
        }
    }
    // Scalar forms, and NaN compares unequal to everything.
    let (t, v) = from_values(d, &[5], &[-1.0, 0.0, 0.5, 2.0, f64::NAN], DType::F32);
    let map = |f: fn(f64) -> bool| v.iter().map(|&x| f(x) as u8 as f64).collect::<Vec<_>>();
    check("gt_scalar 0", &t.gt_scalar(0.0), &[5], &map(|x| x > 0.0), 0.0, 0.0);
    check("lt_scalar 0.5", &t.lt_scalar(0.5), &[5], &map(|x| x < 0.5), 0.0, 0.0);
    check("eq_scalar 2", &t.eq_scalar(2.0), &[5], &map(|x| x == 2.0), 0.0, 0.0);
    check("ne NaN", &t.ne(&t), &[5], &[0.0, 0.0, 0.0, 0.0, 1.0], 0.0, 0.0);
    check("eq NaN", &t.eq(&t), &[5], &[1.0, 1.0, 1.0, 1.0, 0.0], 0.0, 0.0);
}

pub fn where_cond(d: &Device) {
    // cond [7, 1], on_true [33], on_false [7, 33] strided: all three broadcast.
    let cv: Vec<f64> = (0..7).map(|i| (i % 3 == 1) as u8 as f64).collect();
    let (cond, _) = from_values(d, &[7, 1], &cv, DType::Bool);
    let (t, tv) = from_values(d, &[33], &values(33, 80), DType::F32);
    let fv = rounded(&values(231, 81), DType::F32);
    let f = strided_input(d, &[7, 33], &fv, DType::F32);
    let want: Vec<f64> = (0..231).map(|k| if cv[k / 33] != 0.0 { tv[k % 33] } else { fv[k] }).collect();
    check("where [7, 1] ? [33] : [7, 33] strided", &Tensor::where_cond(&cond, &t, &f), &[7, 33], &want, 0.0, 0.0);
    // cond [7, 33] from a comparison; scalar on_false.
    let c2 = f.gt_scalar(0.0).unwrap();
    let zero = Tensor::scalar(-9.5, DType::F32, d).unwrap();
    let want: Vec<f64> = fv.iter().map(|&x| if x > 0.0 { x } else { -9.5 }).collect();
    check("where x > 0 ? x : -9.5", &Tensor::where_cond(&c2, &f, &zero), &[7, 33], &want, 0.0, 0.0);
    // i64 branches, 1000+ elements, strided condition.
    let cbig: Vec<f64> = (0..1200).map(|i| ((i * 7) % 5 < 2) as u8 as f64).collect();
    let cs = strided_input(d, &[4, 300], &cbig, DType::Bool);
    let ti = Tensor::arange(0.0, 1200.0, 1.0, DType::I64, d).unwrap().reshape(&[4, 300]).unwrap();
    let fi = Tensor::full(&[300], -1.0, DType::I64, d).unwrap();
    let want: Vec<f64> = (0..1200).map(|i| if cbig[i] != 0.0 { i as f64 } else { -1.0 }).collect();
    check("where i64 1200 strided cond", &Tensor::where_cond(&cs, &ti, &fi), &[4, 300], &want, 0.0, 0.0);
    expect_err("where with an f32 condition", Tensor::where_cond(&t, &t, &t));
    expect_err("where with f32 / f64 branches", Tensor::where_cond(&cond, &t, &t.to_dtype(DType::F64).unwrap()));
    expect_err("where with unbroadcastable shapes", Tensor::where_cond(&cond, &t, &Tensor::ones(&[7, 4], DType::F32, d).unwrap()));
}

/// What `x` (already exact in the source dtype) becomes in `to`.
fn cast_ref(x: f64, to: DType) -> f64 {
    match to {
        DType::I64 | DType::U8 => x.trunc(),
        DType::Bool => (x != 0.0) as u8 as f64,
        DType::F16 => crate::dtype::f16_from_f64(x).to_f64(),
        DType::BF16 => crate::dtype::bf16_from_f64(x).to_f64(),
        DType::F32 => x as f32 as f64,
        DType::F64 => x,
    }
}

pub fn cast(d: &Device) {
    // Values exact in every source dtype they are used with; negatives only where the target
    // is signed (a negative float to u8 is undefined in PyTorch).
    let signed = [-2.75, -1.0, -0.5, 0.0, 0.25, 1.0, 2.5, 3.75, 100.0, -100.0, 7.0];
    let unsigned = [0.0, 0.25, 1.0, 2.5, 3.75, 100.0, 200.0, 255.0, 7.0, 0.5, 1.5];
    for from in DType::ALL {
        for to in DType::ALL {
            let set: &[f64] = if to == DType::U8 || from == DType::U8 { &unsigned } else { &signed };
            let src: Vec<f64> = match from {
                DType::Bool => set.iter().map(|&x| (x != 0.0) as u8 as f64).collect(),
                DType::I64 | DType::U8 => set.iter().map(|x| x.trunc()).collect(),
                _ => set.to_vec(),
            };
            let (t, sv) = from_values(d, &[src.len()], &src, from);
            let want: Vec<f64> = sv.iter().map(|&x| cast_ref(x, to)).collect();
            let what = format!("cast {from} -> {to}");
            let got = t.to_dtype(to);
            assert_eq!(got.as_ref().map(|g| g.dtype()).ok(), Some(to), "{what}: dtype");
            check(&what, &got, &[src.len()], &want, 0.0, 0.0);
            // The same from a strided view.
            let s = strided_input(d, &[1, src.len()], &sv, from).t().unwrap();
            check(&format!("{what} strided"), &s.to_dtype(to), &[src.len(), 1], &want, 0.0, 0.0);
        }
    }
}

pub fn cast_rounding(d: &Device) {
    // f32 -> f16 / bf16 rounds to nearest even; overflow goes to inf in f16 only; subnormals.
    let x32 = [0.1f32, 1.0 / 3.0, 2049.0, 2051.0, 65504.0, 70000.0, 1e-5, -1e-7, 3.0e38, -1.0009766];
    let t = Tensor::from_slice(&x32, &[x32.len()], d).unwrap();
    let want16: Vec<f64> = x32.iter().map(|&x| f16::from_f32(x).to_f64()).collect();
    check("cast f32 -> f16 rounding", &t.to_dtype(DType::F16), &[x32.len()], &want16, 0.0, 0.0);
    let wantb: Vec<f64> = x32.iter().map(|&x| bf16::from_f32(x).to_f64()).collect();
    check("cast f32 -> bf16 rounding", &t.to_dtype(DType::BF16), &[x32.len()], &wantb, 0.0, 0.0);
    // f64 -> f32 rounding, and back up exactly.
    let v = values(1001, 90);
    let (t64, _) = from_values(d, &[1001], &v, DType::F64);
    let c = t64.to_dtype(DType::F32);
    check("cast f64 -> f32 1001", &c, &[1001], &rounded(&v, DType::F32), 0.0, 0.0);
    check("cast f32 -> f64 1001", &c.unwrap().to_dtype(DType::F64), &[1001], &rounded(&v, DType::F32), 0.0, 0.0);
    // Float -> int truncates toward zero; float -> bool is != 0 (so -0.3 is true).
    let (f, _) = from_values(d, &[6], &[-2.9, -0.3, 0.0, 0.7, 1.999, -7.5], DType::F32);
    check("cast f32 -> i64 truncates", &f.to_dtype(DType::I64), &[6], &[-2.0, 0.0, 0.0, 0.0, 1.0, -7.0], 0.0, 0.0);
    check("cast f32 -> bool", &f.to_dtype(DType::Bool), &[6], &[1.0, 1.0, 0.0, 1.0, 1.0, 1.0], 0.0, 0.0);
    let b = Tensor::from_slice(&[Bool8(1), Bool8(0), Bool8(1)], &[3], d).unwrap();
    check("cast bool -> f16", &b.to_dtype(DType::F16), &[3], &[1.0, 0.0, 1.0], 0.0, 0.0);
    check("cast bool -> i64", &b.to_dtype(DType::I64), &[3], &[1.0, 0.0, 1.0], 0.0, 0.0);
    // Large i64 -> f64 rounds to nearest.
    let big = Tensor::from_slice(&[(1i64 << 53) + 1, -(1i64 << 40) - 3], &[2], d).unwrap();
    check("cast large i64 -> f64", &big.to_dtype(DType::F64), &[2], &[9_007_199_254_740_992.0, -1_099_511_627_779.0], 0.0, 0.0);
}
