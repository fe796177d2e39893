//! Unit tests for the tricky corners of the CPU kernels, through the `Backend` trait. The
//! cross-backend conformance suite lives in `liandan-tensor`.

use liandan_tensor::backend::{BinaryOp, CmpOp, Distribution, ReduceOp, UnaryOp, Window2d};
use liandan_tensor::dtype::{bytes_to_f64, f64_to_bytes};
use liandan_tensor::{Backend, DType, Error, Layout, Storage, Strided};

use crate::CpuBackend;

const B: CpuBackend = CpuBackend;

fn put(values: &[f64], dtype: DType) -> Storage {
    B.from_host(&f64_to_bytes(values, dtype), dtype).unwrap()
}

fn view<'a>(s: &'a Storage, l: &'a Layout, dtype: DType) -> Strided<'a> {
    Strided { storage: &**s, layout: l, dtype }
}

fn get(s: &Storage, dtype: DType) -> Vec<f64> {
    let n = s.size_in_bytes() / dtype.size_in_bytes();
    bytes_to_f64(&B.to_host(view(s, &Layout::contiguous(&[n]), dtype)).unwrap(), dtype)
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol + tol * w.abs(), "{got:?} vs {want:?}");
    }
}

/// Deterministic, non-trivial values.
fn values(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 7919 % 101) as f64 - 50.0) / 8.0).collect()
}

#[test]
fn registered_device_is_this_backend() {
    let d = crate::device();
    assert!(d.is_cpu());
    assert_eq!(d.backend().name(), "cpu");
}

#[test]
fn matmul_of_transposed_views_matches_naive_loop() {
    // The larger product copies its transposed rhs row-major first.
    let cases = [((6, 5, 4), &[DType::F32, DType::F64, DType::BF16][..]), ((300, 260, 130), &[DType::F32, DType::F64][..])];
    for ((m, k, n), dtype) in cases.into_iter().flat_map(|(mkn, dtypes)| dtypes.iter().map(move |&d| (mkn, d))) {
        let a = put(&values(k * m), dtype); // stored [K, M], read transposed
        let b = put(&values(n * k + 1)[1..], dtype); // stored [N, K], read transposed
        let la = Layout::contiguous(&[1, k, m]).permute(&[0, 2, 1]).unwrap();
        let lb = Layout::contiguous(&[1, n, k]).permute(&[0, 2, 1]).unwrap().broadcast_to(&[2, k, n]).unwrap();
        let la = la.broadcast_to(&[2, m, k]).unwrap();
        let got = get(&B.matmul(view(&a, &la, dtype), view(&b, &lb, dtype)).unwrap(), dtype);
        let (av, bv) = (get(&a, dtype), get(&b, dtype));
        let mut want = vec![0.0; 2 * m * n];
        for bi in 0..2 {
            for i in 0..m {
                for j in 0..n {
                    want[(bi * m + i) * n + j] = (0..k).map(|p| av[la.index_of(&[bi, i, p])] * bv[lb.index_of(&[bi, p, j])]).sum();
                }
            }
        }
        close(&got, &want, if dtype == DType::BF16 { 2e-2 } else { 1e-5 });
    }
    let i = put(&[1.0; 4], DType::I64);
    let l = Layout::contiguous(&[1, 2, 2]);
    assert!(matches!(B.matmul(view(&i, &l, DType::I64), view(&i, &l, DType::I64)), Err(Error::BadDType { .. })));
}

fn window(h: usize, w: usize, k: usize, s: usize, p: usize, d: usize) -> Window2d {
    Window2d { n: 1, c: 1, h, w, kernel: (k, k), stride: (s, s), padding: (p, p), dilation: (d, d) }
}

#[test]
fn avg_pool_count_include_pad_as_pytorch() {
    // torch.nn.functional.avg_pool2d(torch.arange(1., 10.).view(1, 1, 3, 3), 3, 2, 1,
    //     count_include_pad=...) gives [[12, 16], [24, 28]] / 9 with, [[3, 4], [6, 7]] without.
    let x = put(&(1..=9).map(f64::from).collect::<Vec<_>>(), DType::F32);
    let l = Layout::contiguous(&[1, 1, 3, 3]);
    let w = window(3, 3, 3, 2, 1, 1);
    let with = get(&B.avg_pool2d(view(&x, &l, DType::F32), w, true).unwrap(), DType::F32);
    close(&with, &[12.0 / 9.0, 16.0 / 9.0, 24.0 / 9.0, 28.0 / 9.0], 1e-6);
    let without = get(&B.avg_pool2d(view(&x, &l, DType::F32), w, false).unwrap(), DType::F32);
    close(&without, &[3.0, 4.0, 6.0, 7.0], 1e-6);
    let dy = put(&[1.0; 4], DType::F32);
    let ldy = Layout::contiguous(&[1, 1, 2, 2]);
    let dx = get(&B.avg_pool2d_backward(view(&dy, &ldy, DType::F32), w, true).unwrap(), DType::F32);
    close(&dx, &[1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0].map(|v| v / 9.0), 1e-6);
    let dx = get(&B.avg_pool2d_backward(view(&dy, &ldy, DType::F32), w, false).unwrap(), DType::F32);
    close(&dx, &[0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25], 1e-6);
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn backward_windows_are_adjoints() {
    // <f(x), y> == <x, f*(y)> for im2col/col2im and avg_pool/its backward.
    let w = Window2d { n: 2, c: 3, h: 7, w: 6, kernel: (3, 2), stride: (2, 1), padding: (1, 1), dilation: (2, 1) };
    let lx = Layout::contiguous(&[2, 3, 7, 6]);
    let x = values(lx.numel());
    let xs = put(&x, DType::F64);
    let shifts = [(3, 3), (5, 3), (3, 5)].map(|kernel| Window2d { kernel, stride: (1, 1), padding: (kernel.0 / 2, kernel.1 / 2), dilation: (1, 1), ..w });
    let wide = Window2d { kernel: (3, 7), stride: (1, 1), padding: (0, 3), dilation: (1, 1), ..w };
    // A one-pixel image: every tap but the centre wholly in the padding.
    let pixel = Window2d { h: 1, w: 1, ..shifts[0] };
    for wc in [w, Window2d { kernel: (1, 2), stride: (2, 3), padding: (2, 1), ..w }].into_iter().chain(shifts).chain([wide, pixel]) {
        let lx = Layout::contiguous(&[wc.n, wc.c, wc.h, wc.w]);
        let x = values(lx.numel());
        let cols = get(&B.im2col(view(&put(&x, DType::F64), &lx, DType::F64), wc, 0.0).unwrap(), DType::F64);
        let lc = Layout::contiguous(&[2, wc.col_rows(), wc.col_cols()]);
        assert_eq!(cols.len(), lc.numel());
        let y: Vec<f64> = values(lc.numel() + 3)[3..].to_vec();
        let back = get(&B.col2im(view(&put(&y, DType::F64), &lc, DType::F64), wc).unwrap(), DType::F64);
        close(&[dot(&cols, &y)], &[dot(&x, &back)], 1e-9);
        // f32 folds back through its own vector code; in eighths, its sums are exact.
        let back32 = get(&B.col2im(view(&put(&y, DType::F32), &lc, DType::F32), wc).unwrap(), DType::F32);
        assert_eq!(back32, back, "{wc:?}");
    }
    for include in [true, false] {
        let w = Window2d { dilation: (1, 1), ..w };
        let out = get(&B.avg_pool2d(view(&xs, &lx, DType::F64), w, include).unwrap(), DType::F64);
        let lo = Layout::contiguous(&[2, 3, w.out_h(), w.out_w()]);
        let y: Vec<f64> = values(lo.numel() + 5)[5..].to_vec();
        let back = get(&B.avg_pool2d_backward(view(&put(&y, DType::F64), &lo, DType::F64), w, include).unwrap(), DType::F64);
        close(&[dot(&out, &y)], &[dot(&x, &back)], 1e-9);
    }
}

/// im2col and max pooling straight from their definitions, one output at a time.
fn naive_windows(x: &[f64], w: &Window2d) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (kh, kw) = w.kernel;
    let (mut cols, mut vals, mut idx) = (vec![], vec![], vec![]);
    let at = |y: usize, i: usize, s: usize, p: usize, d: usize, size: usize| {
        let v = (y * s + i * d) as isize - p as isize;
        (0..size as isize).contains(&v).then_some(v as usize)
    };
    for p in 0..w.n * w.c {
        for i in 0..kh {
            for j in 0..kw {
                for y in 0..w.out_h() {
                    for xo in 0..w.out_w() {
                        let v = match (at(y, i, w.stride.0, w.padding.0, w.dilation.0, w.h), at(xo, j, w.stride.1, w.padding.1, w.dilation.1, w.w)) {
                            (Some(ih), Some(iw)) => x[p * w.h * w.w + ih * w.w + iw],
                            _ => -7.0,
                        };
                        cols.push(v);
                    }
                }
            }
        }
        for y in 0..w.out_h() {
            for xo in 0..w.out_w() {
                let mut best = (f64::NEG_INFINITY, -1.0);
                for i in 0..kh {
                    for j in 0..kw {
                        if let (Some(ih), Some(iw)) =
                            (at(y, i, w.stride.0, w.padding.0, w.dilation.0, w.h), at(xo, j, w.stride.1, w.padding.1, w.dilation.1, w.w))
                        {
                            let v = x[p * w.h * w.w + ih * w.w + iw];
                            if best.1 < 0.0 || v > best.0 {
                                best = (v, (ih * w.w + iw) as f64);
                            }
                        }
                    }
                }
                vals.push(best.0);
                idx.push(best.1);
            }
        }
    }
    (cols, vals, idx)
}

#[test]
fn im2col_and_max_pool_match_their_definitions() {
    let geometries = [
        ((5, 6), (3, 3), (1, 1), (1, 1), (1, 1)),
        ((7, 5), (3, 2), (2, 3), (1, 0), (2, 1)),
        ((4, 4), (1, 1), (1, 1), (2, 2), (1, 1)), // rows and columns wholly in the padding
        ((6, 9), (2, 3), (3, 2), (1, 1), (1, 3)),
        // Without padding or dilation: 2 x 2 windows apart, leaving the last row and column
        // out; 2 x 2 overlapping; and another window size.
        ((7, 9), (2, 2), (2, 2), (0, 0), (1, 1)),
        ((5, 6), (2, 2), (1, 1), (0, 0), (1, 1)),
        ((8, 7), (3, 2), (2, 1), (0, 0), (1, 1)),
        // Stride 1 with outputs as wide as the input, whose taps are the plane shifted: taller
        // and wider kernels, unpadded rows, kernels wider than the plane, and rows wholly in
        // the padding.
        ((5, 6), (5, 3), (1, 1), (2, 1), (1, 1)),
        ((4, 3), (3, 5), (1, 1), (1, 2), (1, 1)),
        ((6, 5), (3, 3), (1, 1), (0, 1), (1, 1)),
        ((3, 1), (3, 3), (1, 1), (1, 1), (1, 1)),
        ((1, 1), (3, 3), (1, 1), (1, 1), (1, 1)),
        ((3, 2), (1, 5), (1, 1), (0, 2), (1, 1)),
        ((2, 4), (1, 3), (1, 1), (3, 1), (1, 1)),
    ];
    for ((h, ww), kernel, stride, padding, dilation) in geometries {
        let w = Window2d { n: 2, c: 2, h, w: ww, kernel, stride, padding, dilation };
        let lx = Layout::contiguous(&[2, 2, h, ww]);
        let x = values(lx.numel());
        let xs = put(&x, DType::F64);
        let (cols, vals, idx) = naive_windows(&x, &w);
        assert_eq!(get(&B.im2col(view(&xs, &lx, DType::F64), w, -7.0).unwrap(), DType::F64), cols, "{w:?}");
        let (v, i) = B.max_pool2d(view(&xs, &lx, DType::F64), w).unwrap();
        assert_eq!(get(&v, DType::F64), vals, "{w:?}");
        assert_eq!(get(&i, DType::I64), idx, "{w:?}");
    }
}

#[test]
fn im2col_pads_with_pad_value() {
    let x = put(&[1.0, 2.0, 3.0, 4.0], DType::F32);
    let l = Layout::contiguous(&[1, 1, 2, 2]);
    let cols = get(&B.im2col(view(&x, &l, DType::F32), window(2, 2, 2, 1, 1, 1), -9.0).unwrap(), DType::F32);
    // 3x3 outputs; row 0 is tap (0, 0), which reads x[oh - 1, ow - 1].
    assert_eq!(&cols[..9], &[-9.0, -9.0, -9.0, -9.0, 1.0, 2.0, -9.0, 3.0, 4.0]);
}

#[test]
fn max_pool_indices_padding_dilation() {
    let x = put(&(1..=16).map(|v| -(v as f64)).collect::<Vec<_>>(), DType::F32);
    let l = Layout::contiguous(&[1, 1, 4, 4]);
    // All values negative: a padded zero must never win.
    let (v, i) = B.max_pool2d(view(&x, &l, DType::F32), window(4, 4, 3, 2, 1, 1)).unwrap();
    assert_eq!(get(&v, DType::F32), vec![-1.0, -2.0, -5.0, -6.0]);
    assert_eq!(get(&i, DType::I64), vec![0.0, 1.0, 4.0, 5.0]);
    // Dilation 2: output (0, 0) sees (0,0), (0,2), (2,0), (2,2).
    let (v, i) = B.max_pool2d(view(&x, &l, DType::F32), window(4, 4, 2, 1, 0, 2)).unwrap();
    assert_eq!(get(&v, DType::F32), vec![-1.0, -2.0, -5.0, -6.0]);
    assert_eq!(get(&i, DType::I64), vec![0.0, 1.0, 4.0, 5.0]);
    // Ties keep the first position; NaN wins.
    let x = put(&[3.0, 3.0, 1.0, f64::NAN], DType::F32);
    let l = Layout::contiguous(&[1, 1, 2, 2]);
    let (v, i) = B.max_pool2d(view(&x, &l, DType::F32), window(2, 2, 1, 1, 0, 1)).unwrap();
    assert_eq!(get(&i, DType::I64), vec![0.0, 1.0, 2.0, 3.0]);
    assert!(get(&v, DType::F32)[3].is_nan());
    let (_, i) = B.max_pool2d(view(&x, &l, DType::F32), window(2, 2, 2, 1, 0, 1)).unwrap();
    assert_eq!(get(&i, DType::I64), vec![3.0]);
}

#[test]
fn scatter_add_sums_repeated_indices() {
    let dst = put(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], DType::F32);
    let ld = Layout::contiguous(&[2, 3]);
    let index = put(&[0.0, 2.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0], DType::I64);
    let li = Layout::contiguous(&[2, 4]);
    let src = put(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], DType::F32);
    let out = B.scatter_add(view(&dst, &ld, DType::F32), view(&index, &li, DType::I64), view(&src, &li, DType::F32), 1).unwrap();
    assert_eq!(get(&out, DType::F32), vec![18.0, 20.0, 32.0, 40.0, 76.0, 60.0]);
    // Along dim 0 with a transposed dst view.
    let ldt = Layout::contiguous(&[3, 2]).permute(&[1, 0]).unwrap();
    let index = put(&[1.0, 1.0, 1.0], DType::I64);
    let li = Layout::contiguous(&[1, 3]);
    let out = B.scatter_add(view(&dst, &ldt, DType::F32), view(&index, &li, DType::I64), view(&src, &li, DType::F32), 0).unwrap();
    assert_eq!(get(&out, DType::F32), vec![10.0, 30.0, 50.0, 21.0, 42.0, 63.0]);
}

#[test]
fn bad_indices_are_errors() {
    let src = put(&values(6), DType::F32);
    let ls = Layout::contiguous(&[2, 3]);
    let s = view(&src, &ls, DType::F32);
    let bad = put(&[0.0, 3.0], DType::I64);
    let neg = put(&[-1.0, 0.0], DType::I64);
    let li = Layout::contiguous(&[1, 2]);
    let l1 = Layout::contiguous(&[2]);
    let oob = |r: liandan_tensor::Result<Storage>| matches!(r, Err(Error::IndexOutOfRange { .. }));
    assert!(oob(B.gather(s, view(&bad, &li, DType::I64), 1)));
    assert!(oob(B.gather(s, view(&neg, &li, DType::I64), 1)));
    assert!(oob(B.index_select(s, view(&neg, &l1, DType::I64), 0)));
    assert!(oob(B.index_select(s, view(&bad, &l1, DType::I64), 1)));
    let src2 = put(&[1.0, 1.0], DType::F32);
    assert!(oob(B.scatter_add(s, view(&bad, &li, DType::I64), view(&src2, &li, DType::F32), 1)));
    let ok = put(&[2.0, 0.0], DType::I64);
    let picked = B.index_select(s, view(&ok, &l1, DType::I64), 1).unwrap();
    let v = values(6);
    assert_eq!(get(&picked, DType::F32), [v[2], v[0], v[5], v[3]].iter().map(|&x| x as f32 as f64).collect::<Vec<_>>());
}

#[test]
fn gather_and_concat_on_strided_views() {
    let src = put(&values(12), DType::F64);
    let lt = Layout::contiguous(&[4, 3]).permute(&[1, 0]).unwrap(); // [3, 4]
    let index = put(&[3.0, 0.0, 1.0, 1.0, 2.0, 2.0], DType::I64);
    let li = Layout::contiguous(&[3, 2]);
    let got = get(&B.gather(view(&src, &lt, DType::F64), view(&index, &li, DType::I64), 1).unwrap(), DType::F64);
    let v = values(12);
    assert_eq!(got, vec![v[9], v[0], v[4], v[4], v[8], v[8]]);
    let a = put(&[1.0, 2.0, 3.0, 4.0], DType::I64);
    let la = Layout::contiguous(&[2, 2]).permute(&[1, 0]).unwrap();
    let b = put(&[9.0], DType::I64);
    let lb = Layout::new(vec![2, 1], vec![0, 0], 0);
    let got = B.concat(&[view(&a, &la, DType::I64), view(&b, &lb, DType::I64)], 1).unwrap();
    assert_eq!(get(&got, DType::I64), vec![1.0, 3.0, 9.0, 2.0, 4.0, 9.0]);
}

#[test]
fn reductions_argmax_first_and_nan() {
    let x = put(&[1.0, 5.0, 5.0, f64::NAN, 2.0, 2.0], DType::F32);
    let l = Layout::contiguous(&[2, 3, 1]);
    let am = get(&B.reduce(ReduceOp::ArgMax, view(&x, &l, DType::F32)).unwrap(), DType::I64);
    assert_eq!(am, vec![1.0, 0.0]);
    let an = get(&B.reduce(ReduceOp::ArgMin, view(&x, &l, DType::F32)).unwrap(), DType::I64);
    assert_eq!(an, vec![0.0, 0.0]);
    let mx = get(&B.reduce(ReduceOp::Max, view(&x, &l, DType::F32)).unwrap(), DType::F32);
    assert!(mx[0] == 5.0 && mx[1].is_nan());
    let b = put(&[1.0, 0.0, 1.0, 1.0], DType::Bool);
    let lb = Layout::contiguous(&[1, 4, 1]);
    let s = B.reduce(ReduceOp::Sum, view(&b, &lb, DType::Bool)).unwrap();
    assert_eq!(get(&s, DType::I64), vec![3.0]);
    // Large enough for the threaded paths, both lane layouts.
    for (outer, len, inner) in [(2, 40_000, 1), (3, 500, 70)] {
        let l = Layout::contiguous(&[outer, len, inner]);
        let v = values(l.numel());
        let x = put(&v, DType::F64);
        let got = get(&B.reduce(ReduceOp::Sum, view(&x, &l, DType::F64)).unwrap(), DType::F64);
        let arg = get(&B.reduce(ReduceOp::ArgMax, view(&x, &l, DType::F64)).unwrap(), DType::I64);
        for o in 0..outer {
            for i in 0..inner {
                let lane: Vec<f64> = (0..len).map(|j| v[(o * len + j) * inner + i]).collect();
                close(&[got[o * inner + i]], &[lane.iter().sum()], 1e-9);
                let best = lane.iter().cloned().fold(f64::MIN, f64::max);
                assert_eq!(arg[o * inner + i] as usize, lane.iter().position(|&x| x == best).unwrap());
            }
        }
    }
}

#[test]
fn elementwise_edges() {
    let x = put(&[-2.5, -1.7, -0.5, 0.5, 1.5, 2.5], DType::F32);
    let l = Layout::contiguous(&[6]);
    let r = get(&B.unary(UnaryOp::Round, view(&x, &l, DType::F32)).unwrap(), DType::F32);
    assert_eq!(r, vec![-2.0, -2.0, -0.0, 0.0, 2.0, 2.0]);
    let i = get(&B.cast(view(&x, &l, DType::F32), DType::I64).unwrap(), DType::I64);
    assert_eq!(i, vec![-2.0, -1.0, 0.0, 0.0, 1.0, 2.0]);
    let e = get(&B.unary(UnaryOp::Erf, view(&x, &l, DType::F32)).unwrap(), DType::F32);
    close(&e[4..], &[0.966_105_146_475_310_7, 0.999_593_047_982_555], 1e-6);
    let b = get(&B.cast(view(&x, &l, DType::F32), DType::Bool).unwrap(), DType::Bool);
    assert_eq!(b, vec![1.0; 6]);
    // Floor division of integers, and division by zero as an error.
    let p = put(&[7.0, -7.0, 7.0, -7.0], DType::I64);
    let q = put(&[2.0, 2.0, -2.0, -2.0], DType::I64);
    let l4 = Layout::contiguous(&[4]);
    let d = get(&B.binary(BinaryOp::Div, view(&p, &l4, DType::I64), view(&q, &l4, DType::I64)).unwrap(), DType::I64);
    assert_eq!(d, vec![3.0, -4.0, -4.0, 3.0]);
    let z = put(&[0.0], DType::I64);
    let lz = Layout::new(vec![4], vec![0], 0);
    assert!(B.binary(BinaryOp::Div, view(&p, &l4, DType::I64), view(&z, &lz, DType::I64)).is_err());
    assert!(B.binary(BinaryOp::Pow, view(&p, &l4, DType::I64), view(&q, &l4, DType::I64)).is_err());
    assert!(B.unary(UnaryOp::Exp, view(&p, &l4, DType::I64)).is_err());
}

#[test]
fn broadcast_and_transposed_operands() {
    // [300, 200] transposed lhs plus a row broadcast down the columns: big enough to thread.
    let (r, c) = (300, 200);
    let a = put(&values(r * c), DType::F32);
    let la = Layout::contiguous(&[c, r]).permute(&[1, 0]).unwrap();
    let b = put(&values(c + 1), DType::F32);
    let lb = Layout::new(vec![r, c], vec![0, 1], 1);
    let sum = get(&B.binary(BinaryOp::Add, view(&a, &la, DType::F32), view(&b, &lb, DType::F32)).unwrap(), DType::F32);
    let (av, bv) = (get(&a, DType::F32), get(&b, DType::F32));
    let want: Vec<f64> = la.indices().zip(lb.indices()).map(|(i, j)| av[i] + bv[j]).collect();
    close(&sum, &want, 1e-6);
    let gt = get(&B.compare(CmpOp::Gt, view(&a, &la, DType::F32), view(&b, &lb, DType::F32)).unwrap(), DType::Bool);
    let want: Vec<f64> = la.indices().zip(lb.indices()).map(|(i, j)| (av[i] > bv[j]) as u8 as f64).collect();
    assert_eq!(gt, want);
    let host = bytes_to_f64(&B.to_host(view(&a, &la, DType::F32)).unwrap(), DType::F32);
    assert_eq!(host, la.indices().map(|i| av[i]).collect::<Vec<_>>());
}

#[test]
fn random_uses_the_shared_generator() {
    let d = Distribution::Normal { mean: 0.5, std: 2.0 };
    let got = get(&B.random(d, 40_000, 42, DType::F32).unwrap(), DType::F32);
    for i in [0, 1, 39_999] {
        assert_eq!(got[i], liandan_tensor::rng::sample(d, 42, i as u32) as f64);
    }
    let bern = get(&B.random(Distribution::Bernoulli { p: 0.3 }, 100, 1, DType::Bool).unwrap(), DType::Bool);
    assert!(bern.iter().all(|&v| v == 0.0 || v == 1.0));
}

#[test]
fn allocations_the_host_cannot_give_are_errors_naming_the_bytes() {
    // Past isize::MAX bytes (a capacity overflow before), and 64 TiB (an allocator abort
    // before): neither touches memory, since the request is refused before any page is used.
    for (numel, bytes) in [(usize::MAX / 2, (usize::MAX / 2) as u128 * 4), (1usize << 44, 1u128 << 46)] {
        match B.full(numel, 1.0, DType::F32) {
            Err(Error::OutOfMemory { bytes: b, .. }) => assert_eq!(b, bytes),
            other => panic!("{numel} elements: {:?}", other.map(|s| s.size_in_bytes())),
        }
    }
    let e = B.random(Distribution::Normal { mean: 0.0, std: 1.0 }, 1 << 44, 0, DType::F64).unwrap_err().to_string();
    assert!(e.contains("140737488355328 bytes"), "{e}");
}
