//! Forward conformance of views (reshape, permute, narrow, expand, squeeze, ...) and
//! `contiguous`, checked against index arithmetic on host vectors.

use super::forward::{check, expect_err, ravel, unravel};
use super::{input, read, strided_input};
use crate::{DType, Device, Tensor};

/// `v` of `shape` with its axes reordered: axis `i` of the result is axis `perm[i]`.
fn ref_permute(v: &[f64], shape: &[usize], perm: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let out = (0..v.len())
        .map(|flat| {
            let oi = unravel(flat, &out_shape);
            let mut si = vec![0; shape.len()];
            for (k, &p) in perm.iter().enumerate() {
                si[p] = oi[k];
            }
            v[ravel(&si, shape)]
        })
        .collect();
    (out, out_shape)
}

/// Elements `start..start + len` of axis `dim`.
fn ref_narrow(v: &[f64], shape: &[usize], dim: usize, start: usize, len: usize) -> (Vec<f64>, Vec<usize>) {
    let mut out_shape = shape.to_vec();
    out_shape[dim] = len;
    let n: usize = out_shape.iter().product();
    let out = (0..n)
        .map(|flat| {
            let mut idx = unravel(flat, &out_shape);
            idx[dim] += start;
            v[ravel(&idx, shape)]
        })
        .collect();
    (out, out_shape)
}

/// Contiguous and non-contiguous (strided) f32 inputs of `shape` holding the same values.
fn inputs(d: &Device, shape: &[usize], seed: u64) -> (Tensor, Tensor, Vec<f64>) {
    let (t, v) = input(d, shape, seed, DType::F32);
    let s = strided_input(d, shape, &v, DType::F32);
    (t, s, v)
}

pub fn reshape(d: &Device) {
    let (t, s, v) = inputs(d, &[7, 33], 1);
    for x in [&t, &s] {
        let tag = if x.is_contiguous() { "contiguous" } else { "strided" };
        for shape in [&[231usize][..], &[33, 7], &[3, 7, 11], &[1, 231, 1], &[11, 1, 21]] {
            check(&format!("reshape {tag} -> {shape:?}"), &x.reshape(shape), shape, &v, 0.0, 0.0);
        }
        check(&format!("flatten {tag}"), &x.flatten(0, -1), &[231], &v, 0.0, 0.0);
        let c = x.contiguous().unwrap();
        assert!(c.is_contiguous(), "contiguous() of a {tag} view");
        check(&format!("contiguous {tag}"), &Ok(c), &[7, 33], &v, 0.0, 0.0);
        expect_err(&format!("reshape {tag} to the wrong size"), x.reshape(&[230]));
    }
    // A reshape of a permuted view must copy: the values follow the logical order.
    let (p, pshape) = ref_permute(&v, &[7, 33], &[1, 0]);
    let tr = t.t().unwrap();
    check("reshape of a transpose", &tr.reshape(&[3, 77]), &[3, 77], &p, 0.0, 0.0);
    assert_eq!(pshape, [33, 7]);
    // Rank-4 flatten of the middle axes, and of a 0-d scalar.
    let (t4, s4, v4) = inputs(d, &[2, 3, 5, 7], 2);
    check("flatten(1, 2)", &t4.flatten(1, 2), &[2, 15, 7], &v4, 0.0, 0.0);
    check("flatten(1, 2) strided", &s4.flatten(1, 2), &[2, 15, 7], &v4, 0.0, 0.0);
    check("flatten(-2, -1) strided", &s4.flatten(-2, -1), &[2, 3, 35], &v4, 0.0, 0.0);
    check("flatten 0-d", &Tensor::scalar(1.5, DType::F32, d).unwrap().flatten(0, 0), &[1], &[1.5], 0.0, 0.0);
    let big = inputs(d, &[3, 1001], 3);
    check("reshape 3003 strided", &big.1.reshape(&[1001, 3]), &[1001, 3], &big.2, 0.0, 0.0);
}

pub fn permute(d: &Device) {
    let shape = [2, 3, 1, 4, 2, 3];
    let (t, s, v) = inputs(d, &shape, 4);
    for perm in [[5, 0, 3, 1, 4, 2], [0, 1, 2, 3, 4, 5], [1, 0, 2, 5, 3, 4]] {
        let (want, ws) = ref_permute(&v, &shape, &perm);
        check(&format!("permute {perm:?}"), &t.permute(&perm), &ws, &want, 0.0, 0.0);
        check(&format!("permute strided {perm:?}"), &s.permute(&perm), &ws, &want, 0.0, 0.0);
        check(&format!("permute {perm:?} contiguous"), &t.permute(&perm).unwrap().contiguous(), &ws, &want, 0.0, 0.0);
    }
    // Permuting twice composes.
    let (p1, s1) = ref_permute(&v, &shape, &[5, 0, 3, 1, 4, 2]);
    let (p2, s2) = ref_permute(&p1, &s1, &[3, 2, 1, 0, 5, 4]);
    check("permute of a permute", &s.permute(&[5, 0, 3, 1, 4, 2]).unwrap().permute(&[3, 2, 1, 0, 5, 4]), &s2, &p2, 0.0, 0.0);
    let (want, ws) = ref_permute(&v, &shape, &[0, 5, 2, 3, 4, 1]);
    check("transpose(1, -1)", &t.transpose(1, -1), &ws, &want, 0.0, 0.0);
    expect_err("permute with a repeated axis", t.permute(&[0, 0, 1, 2, 3, 4]));
    expect_err("permute of the wrong rank", t.permute(&[0, 1]));
    // t() of a matrix and of a batch; of a strided matrix.
    let (m, ms, mv) = inputs(d, &[7, 33], 5);
    let (want, ws) = ref_permute(&mv, &[7, 33], &[1, 0]);
    check("t", &m.t(), &ws, &want, 0.0, 0.0);
    check("t strided", &ms.t(), &ws, &want, 0.0, 0.0);
    check("t t strided", &ms.t().unwrap().t(), &[7, 33], &mv, 0.0, 0.0);
    let (b, bv) = input(d, &[3, 5, 2], 6, DType::F32);
    let (want, ws) = ref_permute(&bv, &[3, 5, 2], &[0, 2, 1]);
    check("t batched", &b.t(), &ws, &want, 0.0, 0.0);
    expect_err("t of a vector", Tensor::ones(&[3], DType::F32, d).unwrap().t());
}

/// Attention's heads: the `[N, L, 3E]` projection chunked, each chunk split into heads
/// (`[N, L, H, hd]` permuted to `[N, H, L, hd]`) and merged back, and the chunks joined along
/// the last axis, in every float type a backend stores natively; head widths in runs of four
/// and not, chunks starting on a multiple of four elements and not.
pub fn heads(d: &Device) {
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for (n, l, h, hd) in [(2, 5, 2, 8), (3, 4, 3, 6), (2, 3, 1, 4)] {
            let e = h * hd;
            let shape = [n, l, 3 * e];
            let (x, v) = input(d, &shape, 40 + hd as u64, dtype);
            let chunks = x.chunk(3, -1isize).expect("chunk");
            for (i, c) in chunks.iter().enumerate() {
                let tag = format!("{dtype} heads {n}x{l}x{h}x{hd}, chunk {i}");
                let (part, ps) = ref_narrow(&v, &shape, 2, i * e, e);
                let (split, ss) = ref_permute(&part, &[n, l, h, hd], &[0, 2, 1, 3]);
                let heads = c.reshape(&[n, l, h, hd]).and_then(|t| t.permute(&[0, 2, 1, 3])).and_then(|t| t.reshape(&[n * h, l, hd]));
                check(&format!("{tag}: split"), &heads, &[ss[0] * ss[1], ss[2], ss[3]], &split, 0.0, 0.0);
                let merged = heads.and_then(|t| t.reshape(&[n, h, l, hd])?.permute(&[0, 2, 1, 3])?.reshape(&[n, l, e]));
                check(&format!("{tag}: merged"), &merged, &ps, &part, 0.0, 0.0);
            }
            // The chunks joined in another order: each written into a strided part of the result.
            let (a, b, c) = (&chunks[2], &chunks[0], &chunks[1]);
            let order = [2, 0, 1];
            let want: Vec<f64> = (0..v.len()).map(|f| (f / (3 * e), f % (3 * e))).map(|(row, j)| v[row * 3 * e + order[j / e] * e + j % e]).collect();
            check(&format!("{dtype} heads {n}x{l}x{h}x{hd}: cat"), &Tensor::cat(&[a, b, c], -1isize), &shape, &want, 0.0, 0.0);
        }
    }
}

pub fn narrow_select(d: &Device) {
    let shape = [5, 7, 33];
    let (t, s, v) = inputs(d, &shape, 7);
    for (dim, start, len) in [(0, 1, 3), (1, 0, 7), (1, 6, 1), (2, 5, 27), (2, 32, 1)] {
        let (want, ws) = ref_narrow(&v, &shape, dim, start, len);
        check(&format!("narrow({dim}, {start}, {len})"), &t.narrow(dim, start, len), &ws, &want, 0.0, 0.0);
        check(&format!("narrow strided ({dim}, {start}, {len})"), &s.narrow(dim, start, len), &ws, &want, 0.0, 0.0);
        // select = narrow to one and drop the axis.
        let mut sel_shape = ws.clone();
        sel_shape.remove(dim);
        let (want, _) = ref_narrow(&v, &shape, dim, start, 1);
        check(&format!("select({dim}, {start}) strided"), &s.select(dim, start), &sel_shape, &want, 0.0, 0.0);
    }
    // Narrow of a narrow, with a negative dim.
    let (n1, s1) = ref_narrow(&v, &shape, 2, 3, 20);
    let (n2, s2) = ref_narrow(&n1, &s1, 2, 4, 9);
    check("narrow of a narrow", &s.narrow(-1, 3, 20).unwrap().narrow(2, 4, 9), &s2, &n2, 0.0, 0.0);
    expect_err("narrow past the end", t.narrow(1, 5, 3));
    expect_err("narrow of a bad dim", t.narrow(3, 0, 1));
    // Rank 6, narrowed then permuted then made contiguous.
    let shape6 = [3, 2, 4, 1, 5, 2];
    let (t6, v6) = input(d, &shape6, 8, DType::F32);
    let (n6, ns6) = ref_narrow(&v6, &shape6, 4, 1, 3);
    let (p6, ps6) = ref_permute(&n6, &ns6, &[4, 2, 0, 5, 1, 3]);
    let got = t6.narrow(4, 1, 3).and_then(|x| x.permute(&[4, 2, 0, 5, 1, 3])).and_then(|x| x.contiguous());
    check("rank-6 narrow, permute, contiguous", &got, &ps6, &p6, 0.0, 0.0);
}

pub fn split_chunk(d: &Device) {
    let shape = [7, 33];
    let (t, s, v) = inputs(d, &shape, 9);
    for x in [&t, &s] {
        // Split 33 columns by 10: 10, 10, 10, 3.
        let parts = x.split(10, 1).expect("split");
        assert_eq!(parts.len(), 4);
        for (k, p) in parts.iter().enumerate() {
            let len = if k == 3 { 3 } else { 10 };
            let (want, ws) = ref_narrow(&v, &shape, 1, 10 * k, len);
            check(&format!("split part {k}"), &Ok(p.clone()), &ws, &want, 0.0, 0.0);
        }
        // 7 rows in 3 chunks: 3, 3, 1 (torch.chunk).
        let chunks = x.chunk(3, 0).expect("chunk");
        let sizes: Vec<usize> = chunks.iter().map(|c| c.shape()[0]).collect();
        assert_eq!(sizes, [3, 3, 1], "chunk(3) of 7 rows");
        for (k, c) in chunks.iter().enumerate() {
            let (want, ws) = ref_narrow(&v, &shape, 0, 3 * k, sizes[k]);
            check(&format!("chunk {k}"), &Ok(c.clone()), &ws, &want, 0.0, 0.0);
        }
        // More chunks than rows gives one row each.
        assert_eq!(x.chunk(9, 0).unwrap().len(), 7);
        assert_eq!(x.split(33, -1).unwrap().len(), 1);
    }
    expect_err("split by 0", t.split(0, 0));
    expect_err("chunk into 0", t.chunk(0, 0));
}

pub fn expand_squeeze(d: &Device) {
    let (t, v) = input(d, &[3, 1, 5], 10, DType::F32);
    let target = [2, 3, 4, 5];
    let want: Vec<f64> = (0..120)
        .map(|f| {
            let i = unravel(f, &target);
            v[i[1] * 5 + i[3]]
        })
        .collect();
    let e = t.expand(&target);
    check("expand [3, 1, 5] -> [2, 3, 4, 5]", &e, &target, &want, 0.0, 0.0);
    check("expand contiguous", &e.as_ref().unwrap().contiguous(), &target, &want, 0.0, 0.0);
    check("expand then reshape", &e.as_ref().unwrap().reshape(&[6, 20]), &[6, 20], &want, 0.0, 0.0);
    expect_err("expand a non-1 axis", t.expand(&[3, 2, 4]));
    // Expanding a strided view, and a scalar.
    let s = strided_input(d, &[3, 1, 5], &v, DType::F32);
    check("expand strided", &s.expand(&target), &target, &want, 0.0, 0.0);
    let sc = Tensor::scalar(-1.25, DType::F32, d).unwrap();
    check("expand scalar", &sc.expand(&[7, 33]), &[7, 33], &[-1.25; 231], 0.0, 0.0);
    // squeeze / unsqueeze, with negative dims.
    check("squeeze(1)", &t.squeeze(1), &[3, 5], &v, 0.0, 0.0);
    check("squeeze(-2) strided", &s.squeeze(-2), &[3, 5], &v, 0.0, 0.0);
    expect_err("squeeze of a non-1 axis", t.squeeze(0));
    for (dim, shape) in [(0isize, [1, 3, 1, 5]), (3, [3, 1, 5, 1]), (-1, [3, 1, 5, 1]), (-4, [1, 3, 1, 5]), (2, [3, 1, 1, 5])] {
        check(&format!("unsqueeze({dim}) strided"), &s.unsqueeze(dim), &shape, &v, 0.0, 0.0);
    }
    expect_err("unsqueeze out of range", t.unsqueeze(5));
    // An expanded (stride-0) view feeds an op like any other tensor.
    let (r, rv) = input(d, &[4, 5], 11, DType::F32);
    let sum = read("add expanded", &s.expand(&target).and_then(|x| x.add(&r)));
    let want_sum: Vec<f64> = (0..120)
        .map(|f| {
            let i = unravel(f, &target);
            v[i[1] * 5 + i[3]] + rv[i[2] * 5 + i[3]]
        })
        .collect();
    super::assert_close("add of an expanded view", &sum, &want_sum, 1e-6, 1e-6);
}
