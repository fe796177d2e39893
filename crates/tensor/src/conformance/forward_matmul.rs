//! Forward conformance of `matmul` (vectors, matrices, broadcast batches, transposed and
//! strided operands, every float dtype) and of `linear`.

use super::forward::{broadcast_ravel, broadcast_shape, check, expect_shapes_err, unravel};
use super::{input, strided_input};
use crate::{DType, Device, Tensor};

/// `[.., M, K] x [.., K, N]` with broadcast batch dims, on row-major host values.
pub fn ref_matmul(a: &[f64], ash: &[usize], b: &[f64], bsh: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let (ra, rb) = (ash.len(), bsh.len());
    let (m, k, n) = (ash[ra - 2], ash[ra - 1], bsh[rb - 1]);
    assert_eq!(k, bsh[rb - 2]);
    let (abatch, bbatch) = (&ash[..ra - 2], &bsh[..rb - 2]);
    let batch = broadcast_shape(abatch, bbatch);
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * m * n);
    for bi in 0..nb {
        let idx = unravel(bi, &batch);
        let (ao, bo) = (broadcast_ravel(&idx, abatch) * m * k, broadcast_ravel(&idx, bbatch) * k * n);
        for i in 0..m {
            for j in 0..n {
                out.push((0..k).map(|p| a[ao + i * k + p] * b[bo + p * n + j]).sum());
            }
        }
    }
    let mut shape = batch;
    shape.extend_from_slice(&[m, n]);
    (out, shape)
}

/// `v` of a `[.., r, c]` batch of matrices, each transposed (what a `[.., c, r]` tensor must
/// hold for its `.t()` to hold `v`).
fn transposed(v: &[f64], batch: usize, r: usize, c: usize) -> Vec<f64> {
    (0..batch * r * c)
        .map(|f| {
            let (b, i, j) = (f / (r * c), (f / r) % c, f % r);
            v[b * r * c + j * c + i]
        })
        .collect()
}

pub fn matmul(d: &Device) {
    for &(m, k, n) in &[(1, 1, 1), (7, 33, 5), (65, 129, 33), (1, 1000, 3)] {
        let (a, av) = input(d, &[m, k], 10, DType::F32);
        let (b, bv) = input(d, &[k, n], 11, DType::F32);
        let (want, shape) = ref_matmul(&av, &[m, k], &bv, &[k, n]);
        let what = format!("matmul {m}x{k}x{n}");
        let tol = 1e-5 * (k as f64).sqrt().max(1.0);
        check(&what, &a.matmul(&b), &shape, &want, tol, 1e-5);
        // Non-contiguous operands: strided views, and transposes of [k, m] / [n, k] storage.
        let (sa, sb) = (strided_input(d, &[m, k], &av, DType::F32), strided_input(d, &[k, n], &bv, DType::F32));
        check(&format!("{what} strided"), &sa.matmul(&sb), &shape, &want, tol, 1e-5);
        let at = Tensor::from_f64s(&transposed(&av, 1, m, k), &[k, m], DType::F32, d).unwrap().t().unwrap();
        let bt = Tensor::from_f64s(&transposed(&bv, 1, k, n), &[n, k], DType::F32, d).unwrap().t().unwrap();
        check(&format!("{what} a.t()"), &at.matmul(&b), &shape, &want, tol, 1e-5);
        check(&format!("{what} b.t()"), &a.matmul(&bt), &shape, &want, tol, 1e-5);
        check(&format!("{what} a.t() b.t()"), &at.matmul(&bt), &shape, &want, tol, 1e-5);
    }
    // A narrowed operand (row stride larger than its width).
    let (w, wv) = input(d, &[33, 20], 12, DType::F32);
    let (x, xv) = input(d, &[7, 9], 13, DType::F32);
    let nv: Vec<f64> = (0..9 * 20).map(|f| wv[(4 + f / 20) * 20 + f % 20]).collect();
    let (want, shape) = ref_matmul(&xv, &[7, 9], &nv, &[9, 20]);
    check("matmul narrowed rhs", &x.matmul(&w.narrow(0, 4, 9).unwrap()), &shape, &want, 1e-5, 1e-5);
}

pub fn matmul_vectors(d: &Device) {
    for &(m, k, n) in &[(1, 1, 1), (7, 33, 5), (3, 1001, 2)] {
        let (x, xv) = input(d, &[k], 20, DType::F32);
        let (y, yv) = input(d, &[k], 21, DType::F32);
        let (a, av) = input(d, &[m, k], 22, DType::F32);
        let (b, bv) = input(d, &[k, n], 23, DType::F32);
        let tol = 1e-5 * (k as f64).sqrt();
        let dot: f64 = xv.iter().zip(&yv).map(|(p, q)| p * q).sum();
        check(&format!("matmul [{k}] x [{k}]"), &x.matmul(&y), &[], &[dot], tol, 1e-5);
        check(&format!("matmul [{k}] x [{k}, {n}]"), &x.matmul(&b), &[n], &ref_matmul(&xv, &[1, k], &bv, &[k, n]).0, tol, 1e-5);
        check(&format!("matmul [{m}, {k}] x [{k}]"), &a.matmul(&y), &[m], &ref_matmul(&av, &[m, k], &yv, &[k, 1]).0, tol, 1e-5);
        // Strided vectors.
        let (sx, sy) = (strided_input(d, &[k], &xv, DType::F32), strided_input(d, &[k], &yv, DType::F32));
        check(&format!("matmul strided [{k}] x [{k}]"), &sx.matmul(&sy), &[], &[dot], tol, 1e-5);
    }
    // A vector against a batch, both ways.
    let (x, xv) = input(d, &[5], 24, DType::F32);
    let (b, bv) = input(d, &[3, 5, 4], 25, DType::F32);
    check("matmul [5] x [3, 5, 4]", &x.matmul(&b), &[3, 4], &ref_matmul(&xv, &[1, 5], &bv, &[3, 5, 4]).0, 1e-5, 1e-5);
    let (a, av) = input(d, &[3, 4, 5], 26, DType::F32);
    check("matmul [3, 4, 5] x [5]", &a.matmul(&x), &[3, 4], &ref_matmul(&av, &[3, 4, 5], &xv, &[5, 1]).0, 1e-5, 1e-5);
}

pub fn matmul_batched(d: &Device) {
    let cases: [(&[usize], &[usize]); 6] = [
        (&[2, 1, 7, 33], &[3, 33, 5]),
        (&[4, 7, 9], &[9, 5]),
        (&[7, 9], &[4, 9, 5]),
        (&[2, 3, 5, 6], &[2, 3, 6, 4]),
        (&[1, 1, 1], &[1, 1, 1]),
        (&[3, 1, 65, 17], &[1, 2, 17, 33]),
    ];
    for (ash, bsh) in cases {
        let (a, av) = input(d, ash, 30, DType::F32);
        let (b, bv) = input(d, bsh, 31, DType::F32);
        let (want, shape) = ref_matmul(&av, ash, &bv, bsh);
        let what = format!("matmul {ash:?} x {bsh:?}");
        check(&what, &a.matmul(&b), &shape, &want, 1e-4, 1e-5);
        let (sa, sb) = (strided_input(d, ash, &av, DType::F32), strided_input(d, bsh, &bv, DType::F32));
        check(&format!("{what} strided"), &sa.matmul(&sb), &shape, &want, 1e-4, 1e-5);
        // Each rhs matrix stored transposed.
        let (r, c) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
        let nb = bv.len() / (r * c);
        let mut tshape = bsh.to_vec();
        let rank = tshape.len();
        tshape.swap(rank - 2, rank - 1);
        let bt = Tensor::from_f64s(&transposed(&bv, nb, r, c), &tshape, DType::F32, d).unwrap().t().unwrap();
        check(&format!("{what} transposed rhs"), &a.matmul(&bt), &shape, &want, 1e-4, 1e-5);
    }
    // An expanded (stride-0) batch.
    let (a, av) = input(d, &[1, 7, 9], 32, DType::F32);
    let (b, bv) = input(d, &[4, 9, 5], 33, DType::F32);
    let (want, shape) = ref_matmul(&av, &[1, 7, 9], &bv, &[4, 9, 5]);
    check("matmul expanded lhs batch", &a.expand(&[4, 7, 9]).unwrap().matmul(&b), &shape, &want, 1e-5, 1e-5);
}

pub fn matmul_dtypes(d: &Device) {
    // Accumulation is in f32 (f64 for f64), so the error is the output rounding plus the input
    // rounding already in the reference.
    for (dtype, atol, rtol) in [(DType::F64, 1e-12, 1e-10), (DType::F16, 1e-2, 1e-2), (DType::BF16, 3e-2, 3e-2)] {
        for (ash, bsh) in [(&[7usize, 33][..], &[33usize, 5][..]), (&[2, 1, 7, 9], &[3, 9, 5]), (&[33], &[33]), (&[65, 129], &[129, 3])] {
            let (a, av) = input(d, ash, 40, dtype);
            let (b, bv) = input(d, bsh, 41, dtype);
            let (as2, bs2) = (if ash.len() == 1 { vec![1, ash[0]] } else { ash.to_vec() }, if bsh.len() == 1 { vec![bsh[0], 1] } else { bsh.to_vec() });
            let (want, mut shape) = ref_matmul(&av, &as2, &bv, &bs2);
            if ash.len() == 1 {
                shape.clear();
            }
            let what = format!("matmul {dtype} {ash:?} x {bsh:?}");
            let got = a.matmul(&b);
            assert_eq!(got.as_ref().map(|t| t.dtype()).ok(), Some(dtype), "{what}: dtype");
            check(&what, &got, &shape, &want, atol * (ash[ash.len() - 1] as f64 / 33.0).sqrt().max(1.0), rtol);
            let sb = strided_input(d, bsh, &bv, dtype);
            check(&format!("{what} strided rhs"), &a.matmul(&sb), &shape, &want, atol * (ash[ash.len() - 1] as f64 / 33.0).sqrt().max(1.0), rtol);
        }
    }
}

pub fn linear(d: &Device) {
    let (w, wv) = input(d, &[4, 5], 680, DType::F32);
    let (b, bv) = input(d, &[4], 681, DType::F32);
    for shape in [vec![7usize, 5], vec![2, 3, 5], vec![5], vec![1, 1, 2, 5]] {
        let (x, xv) = input(d, &shape, 682, DType::F32);
        let rows = xv.len() / 5;
        let mut oshape = shape.clone();
        *oshape.last_mut().unwrap() = 4;
        for has_b in [true, false] {
            let want: Vec<f64> =
                (0..rows * 4).map(|f| (0..5).map(|i| xv[(f / 4) * 5 + i] * wv[(f % 4) * 5 + i]).sum::<f64>() + if has_b { bv[f % 4] } else { 0.0 }).collect();
            let what = format!("linear {shape:?} bias={has_b}");
            check(&what, &x.linear(&w, has_b.then_some(&b)), &oshape, &want, 1e-5, 1e-5);
            let (sx, sw) = (strided_input(d, &shape, &xv, DType::F32), strided_input(d, &[4, 5], &wv, DType::F32));
            check(&format!("{what} strided"), &sx.linear(&sw, has_b.then_some(&b)), &oshape, &want, 1e-5, 1e-5);
        }
    }
    let (x, _) = input(d, &[3, 6], 683, DType::F32);
    expect_shapes_err("linear", x.linear(&w, None), &[3, 6], &[4, 5]);
    let (x, _) = input(d, &[3, 5], 684, DType::F32);
    expect_shapes_err("linear", x.linear(&w, Some(&w)), &[4, 5], &[4, 5]);
}
