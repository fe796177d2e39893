//! Forward conformance of indexing ops: gather, scatter-add, index-select, cat, stack and
//! embedding.

use super::forward::{check, expect_err, expect_shapes_err, ravel, unravel};
use super::{input, positive_values, strided_input};
use crate::{DType, Device, Tensor};

/// `n` seeded indices in `0..size`, as f64 values and as an i64 tensor of `shape`.
fn indices(d: &Device, shape: &[usize], size: usize, seed: u64) -> (Tensor, Vec<f64>) {
    let n = shape.iter().product();
    let v: Vec<f64> = positive_values(n, seed, 0.0, size as f64).iter().map(|x| x.floor().min(size as f64 - 1.0)).collect();
    let ints: Vec<i64> = v.iter().map(|&x| x as i64).collect();
    (Tensor::from_slice(&ints, shape, d).unwrap(), v)
}

/// `out[.., i, ..] = src[.., index[.., i, ..], ..]` along `dim`.
fn ref_gather(src: &[f64], sshape: &[usize], idx: &[f64], ishape: &[usize], dim: usize) -> Vec<f64> {
    (0..idx.len())
        .map(|f| {
            let mut at = unravel(f, ishape);
            at[dim] = idx[f] as usize;
            src[ravel(&at, sshape)]
        })
        .collect()
}

/// `dst` with `src[.., i, ..]` added at `index[.., i, ..]` along `dim`.
fn ref_scatter_add(dst: &[f64], dshape: &[usize], idx: &[f64], ishape: &[usize], src: &[f64], dim: usize) -> Vec<f64> {
    let mut out = dst.to_vec();
    for f in 0..idx.len() {
        let mut at = unravel(f, ishape);
        at[dim] = idx[f] as usize;
        out[ravel(&at, dshape)] += src[f];
    }
    out
}

pub fn gather_scatter(d: &Device) {
    // (src shape, index shape, dim): full and partial index extents, rank 3, a 1000+ row.
    let cases: [(&[usize], &[usize], usize); 6] =
        [(&[7, 33], &[7, 20], 1), (&[7, 33], &[5, 33], 0), (&[7, 33], &[5, 20], 1), (&[3, 4, 5], &[3, 2, 7], 2), (&[1], &[1], 0), (&[2, 1500], &[2, 1200], 1)];
    for (k, (sshape, ishape, dim)) in cases.into_iter().enumerate() {
        let (src, sv) = input(d, sshape, 300 + k as u64, DType::F32);
        let (idx, iv) = indices(d, ishape, sshape[dim], 310 + k as u64);
        let want = ref_gather(&sv, sshape, &iv, ishape, dim);
        let what = format!("gather {sshape:?} dim {dim} index {ishape:?}");
        check(&what, &src.gather(dim, &idx), ishape, &want, 0.0, 0.0);
        let ss = strided_input(d, sshape, &sv, DType::F32);
        let si = strided_input(d, ishape, &iv, DType::I64);
        check(&format!("{what} strided"), &ss.gather(dim, &si), ishape, &want, 0.0, 0.0);
        // scatter_add into a dst of src's shape, with few distinct indices so they repeat.
        let (upd, uv) = input(d, ishape, 320 + k as u64, DType::F32);
        let (ridx, riv) = indices(d, ishape, sshape[dim].min(3), 330 + k as u64);
        let want = ref_scatter_add(&sv, sshape, &riv, ishape, &uv, dim);
        let what = format!("scatter_add {sshape:?} dim {dim} index {ishape:?}");
        check(&what, &src.scatter_add(dim, &ridx, &upd), sshape, &want, 1e-5, 1e-5);
        let su = strided_input(d, ishape, &uv, DType::F32);
        check(&format!("{what} strided"), &ss.scatter_add(dim, &ridx, &su), sshape, &want, 1e-5, 1e-5);
    }
    // Gather along dim 0 with an index taller than the source (allowed on the gathered dim).
    let (src, sv) = input(d, &[4, 33], 340, DType::F64);
    let (idx, iv) = indices(d, &[9, 33], 4, 341);
    check("gather index taller than src", &src.gather(0, &idx), &[9, 33], &ref_gather(&sv, &[4, 33], &iv, &[9, 33], 0), 0.0, 0.0);
    let (upd, uv) = input(d, &[9, 33], 342, DType::F64);
    let want = ref_scatter_add(&sv, &[4, 33], &iv, &[9, 33], &uv, 0);
    check("scatter_add 9 rows into 4", &src.scatter_add(0, &idx, &upd), &[4, 33], &want, 1e-12, 1e-12);
    // Out-of-range indices are errors, not panics.
    let bad = |v: i64| Tensor::from_slice(&[0, v, 1], &[1, 3], d).unwrap();
    let (s2, _) = input(d, &[2, 5], 343, DType::F32);
    // An asynchronous backend finds a bad index while the kernel runs and reports it at the
    // next read, so the error is checked there.
    expect_err("gather index 5 of 5", s2.gather(1, &bad(5)).and_then(|t| t.to_vec_f64()));
    expect_err("gather index -1", s2.gather(1, &bad(-1)).and_then(|t| t.to_vec_f64()));
    let u = Tensor::ones(&[1, 3], DType::F32, d).unwrap();
    expect_err("scatter_add index 5 of 5", s2.scatter_add(1, &bad(5), &u).and_then(|t| t.to_vec_f64()));
    expect_err("scatter_add index -1", s2.scatter_add(1, &bad(-1), &u).and_then(|t| t.to_vec_f64()));
    expect_err("gather with an f32 index", s2.gather(1, &u));
}

pub fn index_select(d: &Device) {
    let (src, sv) = input(d, &[7, 33], 350, DType::F32);
    let ss = strided_input(d, &[7, 33], &sv, DType::F32);
    let pick = |v: &[i64]| Tensor::from_slice(v, &[v.len()], d).unwrap();
    let rows = [6i64, 0, 6, 3, 1];
    let want: Vec<f64> = rows.iter().flat_map(|&r| sv[r as usize * 33..(r as usize + 1) * 33].to_vec()).collect();
    check("index_select rows", &src.index_select(0, &pick(&rows)), &[5, 33], &want, 0.0, 0.0);
    check("index_select rows strided", &ss.index_select(0, &pick(&rows)), &[5, 33], &want, 0.0, 0.0);
    let (cols, cv) = indices(d, &[40], 33, 351);
    let want: Vec<f64> = (0..7 * 40).map(|f| sv[(f / 40) * 33 + cv[f % 40] as usize]).collect();
    check("index_select 40 columns (repeats)", &src.index_select(1, &cols), &[7, 40], &want, 0.0, 0.0);
    check("index_select columns strided, dim -1", &ss.index_select(-1, &cols), &[7, 40], &want, 0.0, 0.0);
    // The middle axis of a rank-3 tensor, and an embedding-style lookup of 1500 rows.
    let (t3, v3) = input(d, &[3, 5, 4], 352, DType::F64);
    let mid = [4i64, 4, 0];
    let want: Vec<f64> = (0..3 * 3 * 4).map(|f| v3[(f / 12) * 20 + mid[(f / 4) % 3] as usize * 4 + f % 4]).collect();
    check("index_select middle axis", &t3.index_select(1, &pick(&mid)), &[3, 3, 4], &want, 0.0, 0.0);
    let (table, tv) = input(d, &[1200, 3], 353, DType::F32);
    let (ids, idv) = indices(d, &[1500], 1200, 354);
    let want: Vec<f64> = (0..4500).map(|f| tv[idv[f / 3] as usize * 3 + f % 3]).collect();
    check("index_select 1500 of 1200 rows", &table.index_select(0, &ids), &[1500, 3], &want, 0.0, 0.0);
    let si = strided_input(d, &[1500], &idv, DType::I64);
    check("index_select strided index", &table.index_select(0, &si), &[1500, 3], &want, 0.0, 0.0);
    expect_err("index_select index 7 of 7", src.index_select(0, &pick(&[1, 7])).and_then(|t| t.to_vec_f64()));
    expect_err("index_select index -1", src.index_select(0, &pick(&[-1])).and_then(|t| t.to_vec_f64()));
    expect_err("index_select 2-D index", src.index_select(0, &Tensor::from_slice(&[0i64, 1], &[1, 2], d).unwrap()));
}

pub fn cat_stack(d: &Device) {
    // Along dim 1: a contiguous part, a narrowed view, an expanded view and a strided part.
    let (a, av) = input(d, &[7, 3], 360, DType::F32);
    let (wide, wv) = input(d, &[7, 40], 361, DType::F32);
    let b = wide.narrow(1, 5, 30).unwrap();
    let (col, colv) = input(d, &[7, 1], 362, DType::F32);
    let c = col.expand(&[7, 2]).unwrap();
    let sv = super::forward::rounded(&super::values(7 * 33, 363), DType::F32);
    let s = strided_input(d, &[7, 33], &sv, DType::F32);
    let part = |r: usize, j: usize| -> f64 {
        match j {
            0..=2 => av[r * 3 + j],
            3..=32 => wv[r * 40 + 5 + j - 3],
            33..=34 => colv[r],
            _ => sv[r * 33 + j - 35],
        }
    };
    let want: Vec<f64> = (0..7 * 68).map(|f| part(f / 68, f % 68)).collect();
    check("cat 4 parts along dim 1", &Tensor::cat(&[&a, &b, &c, &s], 1), &[7, 68], &want, 0.0, 0.0);
    // Along dim 0: transposed parts.
    let want0: Vec<f64> = (0..40).flat_map(|j| (0..7).map(move |r| (r, j))).map(|(r, j)| wv[r * 40 + j]).collect();
    let wt = wide.t().unwrap();
    let parts: Vec<Tensor> = wt.split(13, 0).unwrap();
    let refs: Vec<&Tensor> = parts.iter().collect();
    assert_eq!(refs.len(), 4);
    check("cat of split transposed parts", &Tensor::cat(&refs, 0), &[40, 7], &want0, 0.0, 0.0);
    // Along dim 0 of contiguous parts, which a GPU may join by buffer copies: a part at an
    // offset, a broadcast zero, and f16 parts whose bytes are not 4-aligned.
    let (base, bv) = input(d, &[10, 3], 367, DType::F32);
    let (tail, tv) = input(d, &[3, 3], 368, DType::F32);
    let zero = Tensor::zeros(&[], DType::F32, d).unwrap().expand(&[2, 3]).unwrap();
    let want: Vec<f64> = bv[3..15].iter().copied().chain([0.0; 6]).chain(tv.iter().copied()).collect();
    check("cat dim 0 runs and a gap", &Tensor::cat(&[&base.narrow(0, 1, 4).unwrap(), &zero, &tail], 0), &[9, 3], &want, 0.0, 0.0);
    let (h, hv) = input(d, &[9], 369, DType::F16);
    let halves = [h.narrow(0, 1, 3).unwrap(), h.narrow(0, 4, 5).unwrap(), h.narrow(0, 0, 2).unwrap()];
    let want: Vec<f64> = hv[1..9].iter().chain(&hv[0..2]).copied().collect();
    check("cat dim 0 f16 unaligned", &Tensor::cat(&halves.iter().collect::<Vec<_>>(), 0), &[10], &want, 0.0, 0.0);
    // Rank 3 along the last dim, i64, and a 1000+ long join.
    let (x, xv) = input(d, &[2, 3, 4], 364, DType::F64);
    let (y, yv) = input(d, &[2, 3, 1], 365, DType::F64);
    let want: Vec<f64> = (0..30)
        .map(|f| {
            let (o, j) = (f / 5, f % 5);
            if j < 4 {
                xv[o * 4 + j]
            } else {
                yv[o]
            }
        })
        .collect();
    check("cat rank 3 dim -1", &Tensor::cat(&[&x, &y, &x.narrow(2, 0, 0).unwrap()], -1), &[2, 3, 5], &want, 0.0, 0.0);
    let i1 = Tensor::arange(0.0, 1000.0, 1.0, DType::I64, d).unwrap();
    let i2 = Tensor::arange(1000.0, 1500.0, 1.0, DType::I64, d).unwrap();
    let i3 = Tensor::arange(1500.0, 1507.0, 1.0, DType::I64, d).unwrap();
    let joined = Tensor::cat(&[&i1, &i2, &i3], 0).unwrap();
    assert_eq!(joined.dtype(), DType::I64);
    check("cat i64 1507", &Ok(joined), &[1507], &(0..1507).map(|i| i as f64).collect::<Vec<_>>(), 0.0, 0.0);
    expect_err("cat f32 with f64", Tensor::cat(&[&a, &a.to_dtype(DType::F64).unwrap()], 1));
    expect_err("cat of mismatched shapes", Tensor::cat(&[&a, &s], 0));
    // stack along 0, 1 and -1 (a new last axis).
    let (p, pv) = input(d, &[7, 33], 366, DType::F32);
    let q = s.clone();
    let (r, rv) = input(d, &[7, 33], 367, DType::F32);
    let srcs = [&pv, &sv, &rv];
    for (dim, shape) in [(0isize, [3, 7, 33]), (1, [7, 3, 33]), (-1, [7, 33, 3])] {
        let axis = if dim < 0 { 2 } else { dim as usize };
        let want: Vec<f64> = (0..693)
            .map(|f| {
                let mut i = unravel(f, &shape);
                let k = i.remove(axis);
                srcs[k][i[0] * 33 + i[1]]
            })
            .collect();
        check(&format!("stack dim {dim}"), &Tensor::stack(&[&p, &q, &r], dim), &shape, &want, 0.0, 0.0);
    }
    expect_err("stack of mismatched shapes", Tensor::stack(&[&p, &a], 0));
}

pub fn embedding(d: &Device) {
    let (w, wv) = input(d, &[11, 5], 660, DType::F32);
    let sw = strided_input(d, &[11, 5], &wv, DType::F32);
    for (idx, shape) in [(vec![3i64, 0, 10, 3, 7, 1], vec![2usize, 3]), (vec![4], vec![]), (vec![9, 9, 2, 0, 5, 6, 1], vec![7])] {
        let t = Tensor::from_slice(&idx, &shape, d).unwrap();
        let want: Vec<f64> = idx.iter().flat_map(|&i| wv[i as usize * 5..(i as usize + 1) * 5].to_vec()).collect();
        let mut oshape = shape.clone();
        oshape.push(5);
        check(&format!("embedding {shape:?}"), &t.embedding(&w), &oshape, &want, 0.0, 0.0);
        check(&format!("embedding {shape:?} strided weight"), &t.embedding(&sw), &oshape, &want, 0.0, 0.0);
    }
    let t = Tensor::from_slice(&[1i64, 2], &[2], d).unwrap();
    expect_shapes_err("embedding", t.embedding(&Tensor::zeros(&[11], DType::F32, d).unwrap()), &[2], &[11]);
    expect_err("embedding f32 indices", w.embedding(&w));
    let bad = Tensor::from_slice(&[1i64, 11], &[2], d).unwrap();
    expect_err("embedding index 11 of 11", bad.embedding(&w).and_then(|t| t.to_vec_f64()));
}
