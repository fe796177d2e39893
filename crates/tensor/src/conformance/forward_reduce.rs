//! Forward conformance of reductions: sum, mean, var, max/min and their arg-variants.

use super::forward::{check, drop_dims, expect_err, ref_reduce, rounded};
use super::{from_values, input, strided_input, values};
use crate::{Bool8, DType, Device, Tensor};

fn ref_sum(g: &[f64]) -> f64 {
    g.iter().sum()
}

fn ref_mean(g: &[f64]) -> f64 {
    g.iter().sum::<f64>() / g.len() as f64
}

fn ref_var(g: &[f64], unbiased: bool) -> f64 {
    let m = ref_mean(g);
    g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (g.len() - unbiased as usize) as f64
}

/// The first index of the maximum (`max = true`) or minimum of `g`.
fn ref_arg(g: &[f64], max: bool) -> f64 {
    let better = |a: f64, b: f64| if max { a > b } else { a < b };
    (0..g.len()).fold(0, |best, i| if better(g[i], g[best]) { i } else { best }) as f64
}

/// Contiguous and strided f32 inputs of `shape`, and their values.
fn inputs(d: &Device, shape: &[usize], seed: u64) -> (Tensor, Tensor, Vec<f64>) {
    let (t, v) = input(d, shape, seed, DType::F32);
    let s = strided_input(d, shape, &v, DType::F32);
    (t, s, v)
}

pub fn sum_mean(d: &Device) {
    let shape = [4, 7, 5, 3];
    let (t, s, v) = inputs(d, &shape, 100);
    for dims in [&[1usize][..], &[0, 2], &[1, 2], &[3], &[0, 3], &[0, 1, 2, 3], &[2, 0]] {
        let mut sorted = dims.to_vec();
        sorted.sort();
        let (sum, keep) = ref_reduce(&v, &shape, &sorted, ref_sum);
        let (mean, _) = ref_reduce(&v, &shape, &sorted, ref_mean);
        let flat = drop_dims(&keep, &sorted);
        for (x, tag) in [(&t, ""), (&s, " strided")] {
            check(&format!("sum {dims:?} keepdim{tag}"), &x.sum(dims, true), &keep, &sum, 1e-4, 1e-5);
            check(&format!("sum {dims:?}{tag}"), &x.sum(dims, false), &flat, &sum, 1e-4, 1e-5);
            check(&format!("mean {dims:?} keepdim{tag}"), &x.mean(dims, true), &keep, &mean, 1e-6, 1e-5);
            check(&format!("mean {dims:?}{tag}"), &x.mean(dims, false), &flat, &mean, 1e-6, 1e-5);
        }
    }
    let total: f64 = v.iter().sum();
    check("sum_all strided", &s.sum_all(), &[], &[total], 1e-4, 1e-5);
    check("mean_all", &t.mean_all(), &[], &[total / v.len() as f64], 1e-6, 1e-5);
    // Rows of 1000+ along the inner and the outer axis, strided; and size-1 reductions.
    let (_, sb, vb) = inputs(d, &[3, 1201], 101);
    check("sum of 1201-long rows", &sb.sum(&[1], false), &[3], &ref_reduce(&vb, &[3, 1201], &[1], ref_sum).0, 2e-4, 1e-5);
    check("mean of 1201-long rows", &sb.mean(&[1], false), &[3], &ref_reduce(&vb, &[3, 1201], &[1], ref_mean).0, 1e-6, 1e-5);
    let (_, sc, vc) = inputs(d, &[1201, 3], 102);
    check("sum of 1201-long columns", &sc.sum(&[0], true), &[1, 3], &ref_reduce(&vc, &[1201, 3], &[0], ref_sum).0, 2e-4, 1e-5);
    let (t1, v1) = input(d, &[1, 7, 1], 103, DType::F32);
    check("sum over size-1 dims", &t1.sum(&[0, 2], false), &[7], &v1, 0.0, 0.0);
    check("sum of one element", &input(d, &[1], 104, DType::F32).0.sum_all(), &[], &values(1, 104), 1e-7, 1e-6);
    // Sum of an expanded (stride-0) view counts each repeat.
    let e = t1.expand(&[5, 7, 4]).unwrap();
    let want: Vec<f64> = v1.iter().map(|x| 20.0 * x).collect();
    check("sum of an expanded view", &e.sum(&[0, 2], false), &[7], &want, 1e-5, 1e-5);
    expect_err("sum over a missing dim", t.sum(&[4], false));
    expect_err("mean of i64", Tensor::ones(&[3], DType::I64, d).unwrap().mean_all());
}

pub fn var(d: &Device) {
    let shape = [5, 7, 33];
    let (t, s, v) = inputs(d, &shape, 110);
    for dims in [&[1usize][..], &[0, 2], &[2], &[0, 1, 2]] {
        for unbiased in [false, true] {
            let (want, keep) = ref_reduce(&v, &shape, dims, |g| ref_var(g, unbiased));
            let what = format!("var {dims:?} unbiased {unbiased}");
            check(&format!("{what} keepdim"), &t.var(dims, true, unbiased), &keep, &want, 1e-6, 1e-5);
            check(&format!("{what} strided"), &s.var(dims, false, unbiased), &drop_dims(&keep, dims), &want, 1e-6, 1e-5);
        }
    }
    let (_, sb, vb) = inputs(d, &[2, 1500], 111);
    check("var of 1500-long rows", &sb.var(&[1], false, true), &[2], &ref_reduce(&vb, &[2, 1500], &[1], |g| ref_var(g, true)).0, 1e-5, 1e-5);
}

pub fn extrema(d: &Device) {
    // Integers in [-2, 2] stored as f32: ties in every direction, so first occurrence matters.
    let shape = [4, 7, 33];
    let v: Vec<f64> = values(924, 120).iter().map(|x| x.round()).collect();
    let (t, _) = from_values(d, &shape, &v, DType::F32);
    let s = strided_input(d, &shape, &v, DType::F32);
    for dim in 0..3 {
        let (max, keep) = ref_reduce(&v, &shape, &[dim], |g| g.iter().cloned().fold(f64::MIN, f64::max));
        let (min, _) = ref_reduce(&v, &shape, &[dim], |g| g.iter().cloned().fold(f64::MAX, f64::min));
        let (amax, _) = ref_reduce(&v, &shape, &[dim], |g| ref_arg(g, true));
        let (amin, _) = ref_reduce(&v, &shape, &[dim], |g| ref_arg(g, false));
        let flat = drop_dims(&keep, &[dim]);
        for (x, tag) in [(&t, ""), (&s, " strided")] {
            check(&format!("max({dim}){tag}"), &x.max(dim, false), &flat, &max, 0.0, 0.0);
            check(&format!("min({dim}) keepdim{tag}"), &x.min(dim, true), &keep, &min, 0.0, 0.0);
            let am = x.argmax(dim, false);
            assert_eq!(am.as_ref().map(|a| a.dtype()).ok(), Some(DType::I64), "argmax dtype");
            check(&format!("argmax({dim}){tag}"), &am, &flat, &amax, 0.0, 0.0);
            check(&format!("argmin({dim}) keepdim{tag}"), &x.argmin(dim, true), &keep, &amin, 0.0, 0.0);
        }
    }
    // Negative dims; explicit ties at the start, middle and end of a row.
    let row = [1.0, 3.0, -2.0, 3.0, -2.0, 0.5, 3.0];
    let (r, _) = from_values(d, &[1, 7], &row, DType::F32);
    check("argmax ties -> first", &r.argmax(-1, false), &[1], &[1.0], 0.0, 0.0);
    check("argmin ties -> first", &r.argmin(-1, false), &[1], &[2.0], 0.0, 0.0);
    check("max(-1)", &r.max(-1, true), &[1, 1], &[3.0], 0.0, 0.0);
    check("argmax of a column", &r.argmax(0, false), &[7], &[0.0; 7], 0.0, 0.0);
    check("max_all", &t.max_all(), &[], &[v.iter().cloned().fold(f64::MIN, f64::max)], 0.0, 0.0);
    check("min_all strided", &s.min_all(), &[], &[v.iter().cloned().fold(f64::MAX, f64::min)], 0.0, 0.0);
    // 1000+ long rows of distinct values, strided, along both axes.
    let (_, sb, vb) = inputs(d, &[2, 1500], 121);
    let fold_max = |g: &[f64]| g.iter().cloned().fold(f64::MIN, f64::max);
    check("max of 1500-long rows", &sb.max(1, false), &[2], &ref_reduce(&vb, &[2, 1500], &[1], fold_max).0, 0.0, 0.0);
    check("argmin of 1500-long rows", &sb.argmin(1, false), &[2], &ref_reduce(&vb, &[2, 1500], &[1], |g| ref_arg(g, false)).0, 0.0, 0.0);
    let (tc, vc) = input(d, &[1500, 2], 122, DType::F32);
    check("argmax of 1500-long columns", &tc.argmax(0, false), &[2], &ref_reduce(&vc, &[1500, 2], &[0], |g| ref_arg(g, true)).0, 0.0, 0.0);
    check("max_all 3000", &tc.max_all(), &[], &[vc.iter().cloned().fold(f64::MIN, f64::max)], 0.0, 0.0);
    // i64 extrema stay i64.
    let ti = Tensor::from_slice(&[5i64, -3, 9, 9, -3, 0], &[2, 3], d).unwrap();
    let mi = ti.max(1, false).unwrap();
    assert_eq!(mi.dtype(), DType::I64);
    check("max i64", &Ok(mi), &[2], &[9.0, 9.0], 0.0, 0.0);
    check("argmin i64 ties", &ti.argmin(0, false), &[3], &[0.0, 0.0, 1.0], 0.0, 0.0);
    expect_err("max over a missing dim", t.max(3, false));
}

fn input_of(d: &Device, shape: &[usize], v: &[f64], dtype: DType) -> Tensor {
    from_values(d, shape, v, dtype).0
}

pub fn reduce_dtypes(d: &Device) {
    // f16 / bf16 sums accumulate in f32: 4096 x 0.1 would stall near 256 in f16.
    for (dtype, tol) in [(DType::F16, 0.005), (DType::BF16, 0.01)] {
        let t = Tensor::full(&[4096], 0.1, dtype, d).unwrap();
        let got = t.sum_all().unwrap().item_f64().unwrap();
        assert!((got - 409.6).abs() <= tol * 409.6, "sum of 4096 x 0.1 in {dtype}: got {got}");
        let got = t.reshape(&[64, 64]).unwrap().sum(&[0, 1], false).unwrap().item_f64().unwrap();
        assert!((got - 409.6).abs() <= tol * 409.6, "sum over [64, 64] of 0.1 in {dtype}: got {got}");
        let got = t.mean_all().unwrap().item_f64().unwrap();
        assert!((got - 0.1).abs() <= 1e-3, "mean of 4096 x 0.1 in {dtype}: got {got}");
    }
    // Representative reductions in f16, bf16 and f64 against the dtype-rounded inputs.
    let shape = [7, 33];
    for (dtype, atol, rtol) in [(DType::F16, 2e-2, 1e-2), (DType::BF16, 5e-2, 3e-2), (DType::F64, 1e-12, 1e-12)] {
        let v = rounded(&values(231, 130), dtype);
        let t = strided_input(d, &shape, &v, dtype);
        check(&format!("sum {dtype}"), &t.sum(&[1], false), &[7], &ref_reduce(&v, &shape, &[1], ref_sum).0, atol, rtol);
        check(&format!("mean {dtype}"), &t.mean(&[0], false), &[33], &ref_reduce(&v, &shape, &[0], ref_mean).0, atol, rtol);
        let fold_max = |g: &[f64]| g.iter().cloned().fold(f64::MIN, f64::max);
        check(&format!("max {dtype}"), &t.max(1, false), &[7], &ref_reduce(&v, &shape, &[1], fold_max).0, 0.0, 0.0);
        check(&format!("argmin {dtype}"), &t.argmin(0, false), &[33], &ref_reduce(&v, &shape, &[0], |g| ref_arg(g, false)).0, 0.0, 0.0);
        check(&format!("var {dtype}"), &t.var(&[1], false, true), &[7], &ref_reduce(&v, &shape, &[1], |g| ref_var(g, true)).0, atol, rtol);
    }
    // Integer and bool sums are i64, exact past 2^53.
    let ti = Tensor::from_slice(&[1i64 << 60, 1, 2, -5, 7, 11], &[2, 3], d).unwrap();
    let s = ti.sum(&[1], false).unwrap();
    assert_eq!(s.dtype(), DType::I64);
    assert_eq!(s.to_vec::<i64>().unwrap(), [(1i64 << 60) + 3, 13], "sum i64");
    let tu = input_of(d, &[3, 4], &[255.0, 200.0, 1.0, 7.0, 0.0, 9.0, 255.0, 255.0, 3.0, 4.0, 5.0, 6.0], DType::U8);
    let su = tu.sum(&[1], false).unwrap();
    assert_eq!(su.dtype(), DType::I64, "sum of u8 is i64");
    check("sum u8 (no wrap-around)", &Ok(su), &[3], &[463.0, 519.0, 18.0], 0.0, 0.0);
    let bools: Vec<Bool8> = (0..1100).map(|i| Bool8((i % 3 == 0) as u8)).collect();
    let tb = Tensor::from_slice(&bools, &[1100], d).unwrap();
    let sb = tb.sum_all().unwrap();
    assert_eq!(sb.dtype(), DType::I64, "sum of bool is i64");
    check("sum bool counts", &Ok(sb), &[], &[367.0], 0.0, 0.0);
}
