//! Forward conformance of the nn-layer composites (`conv1d`, `conv_transpose2d`, adaptive
//! pools, `group_norm`, `embedding`, `dropout2d`, `linear`, attention) against direct loops on
//! host vectors, and their shape errors.

use super::forward::{broadcast_ravel, check, expect_err, unravel};
use super::{from_values, input, positive_values, strided_input};
use crate::{DType, Device, Result, Tensor};

/// Asserts that `r` failed with a message naming `op` and both shapes.
#[track_caller]
pub fn expect_shapes_err<T>(op: &str, r: Result<T>, a: &[usize], b: &[usize]) {
    let msg = expect_err(op, r);
    for want in [op.to_string(), format!("{a:?}"), format!("{b:?}")] {
        assert!(msg.contains(&want), "{op}: the error {msg:?} does not name {want}");
    }
}

/// `(N, C, L, O, k, stride, padding, dilation, groups, bias)`.
type Conv1d = (usize, usize, usize, usize, usize, usize, usize, usize, usize, bool);

fn ref_conv1d(x: &[f64], w: &[f64], b: Option<&[f64]>, &(n, c, l, o, k, s, p, dl, g, _): &Conv1d) -> (Vec<f64>, [usize; 3]) {
    let lo = (l + 2 * p - dl * (k - 1) - 1) / s + 1;
    let (cg, og) = (c / g, o / g);
    let mut out = vec![0.0; n * o * lo];
    for (f, v) in out.iter_mut().enumerate() {
        let (ni, oc, t) = (f / (o * lo), (f / lo) % o, f % lo);
        *v = b.map_or(0.0, |b| b[oc]);
        for ci in 0..cg {
            for j in 0..k {
                let pos = (t * s + j * dl) as isize - p as isize;
                if pos >= 0 && (pos as usize) < l {
                    *v += x[(ni * c + (oc / og) * cg + ci) * l + pos as usize] * w[(oc * cg + ci) * k + j];
                }
            }
        }
    }
    (out, [n, o, lo])
}

pub fn conv1d(d: &Device) {
    let cases: [Conv1d; 5] = [
        (2, 3, 11, 4, 3, 1, 0, 1, 1, true),
        (2, 4, 9, 6, 3, 2, 1, 2, 2, true),
        (1, 3, 7, 3, 5, 1, 2, 1, 3, false),
        (1, 1, 1, 1, 1, 1, 0, 1, 1, true),
        (3, 2, 33, 5, 4, 3, 2, 1, 1, true),
    ];
    for case in cases {
        let (n, c, l, o, k, s, p, dl, g, has_b) = case;
        let (x, xv) = input(d, &[n, c, l], 600, DType::F32);
        let (w, wv) = input(d, &[o, c / g, k], 601, DType::F32);
        let (b, bv) = input(d, &[o], 602, DType::F32);
        let (want, shape) = ref_conv1d(&xv, &wv, has_b.then_some(&bv[..]), &case);
        let what = format!("conv1d {case:?}");
        check(&what, &x.conv1d(&w, has_b.then_some(&b), s, p, dl, g), &shape, &want, 1e-5, 1e-5);
        let sx = strided_input(d, &[n, c, l], &xv, DType::F32);
        check(&format!("{what} strided"), &sx.conv1d(&w, has_b.then_some(&b), s, p, dl, g), &shape, &want, 1e-5, 1e-5);
    }
    let (x, _) = input(d, &[2, 4, 9], 603, DType::F32);
    let w = Tensor::zeros(&[6, 3, 3], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&w, None, 1, 0, 1, 1), &[2, 4, 9], &[6, 3, 3]);
    let w4 = Tensor::zeros(&[6, 4, 3, 3], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&w4, None, 1, 0, 1, 1), &[2, 4, 9], &[6, 4, 3, 3]);
    let big = Tensor::zeros(&[6, 4, 12], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&big, None, 1, 1, 1, 1), &[2, 4, 9], &[6, 4, 12]);
    let w = Tensor::zeros(&[6, 4, 3], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&w, Some(&Tensor::zeros(&[5], DType::F32, d).unwrap()), 1, 0, 1, 1), &[6, 4, 3], &[5]);
}

/// `(N, C_in, H, W, C_out, k, stride, padding, output_padding, dilation, groups)`.
type ConvT = (usize, usize, usize, usize, usize, (usize, usize), (usize, usize), (usize, usize), (usize, usize), (usize, usize), usize);

/// Direct scatter: input pixel `(y, x)` adds `x * w[ci, co, i, j]` at output
/// `(y*s - p + i*d, x*s - p + j*d)` of the output channels of its group.
fn ref_conv_transpose2d(x: &[f64], w: &[f64], b: Option<&[f64]>, &(n, ci, h, wd, co, k, s, p, op, dl, g): &ConvT) -> (Vec<f64>, [usize; 4]) {
    let oh = (h - 1) * s.0 + dl.0 * (k.0 - 1) + op.0 + 1 - 2 * p.0;
    let ow = (wd - 1) * s.1 + dl.1 * (k.1 - 1) + op.1 + 1 - 2 * p.1;
    let (cig, cog) = (ci / g, co / g);
    let mut out = vec![0.0; n * co * oh * ow];
    for f in 0..out.len() {
        out[f] = b.map_or(0.0, |b| b[(f / (oh * ow)) % co]);
    }
    for ni in 0..n {
        for c in 0..ci {
            for y in 0..h {
                for xx in 0..wd {
                    let v = x[((ni * ci + c) * h + y) * wd + xx];
                    for c2 in 0..cog {
                        let oc = (c / cig) * cog + c2;
                        for i in 0..k.0 {
                            for j in 0..k.1 {
                                let oy = (y * s.0 + i * dl.0) as isize - p.0 as isize;
                                let ox = (xx * s.1 + j * dl.1) as isize - p.1 as isize;
                                if oy >= 0 && ox >= 0 && (oy as usize) < oh && (ox as usize) < ow {
                                    out[((ni * co + oc) * oh + oy as usize) * ow + ox as usize] += v * w[((c * cog + c2) * k.0 + i) * k.1 + j];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (out, [n, co, oh, ow])
}

pub fn conv_transpose2d(d: &Device) {
    let cases: [ConvT; 6] = [
        (2, 4, 5, 4, 6, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2),
        (2, 3, 4, 5, 2, (3, 2), (1, 1), (0, 0), (0, 0), (1, 1), 1),
        (1, 2, 3, 3, 3, (2, 3), (3, 2), (1, 0), (2, 1), (1, 2), 1),
        // output_padding >= stride is allowed when smaller than the dilation.
        (1, 2, 4, 3, 2, (2, 2), (1, 1), (0, 1), (1, 1), (2, 2), 1),
        (1, 6, 7, 5, 3, (1, 1), (2, 3), (0, 0), (1, 2), (1, 1), 3),
        (1, 1, 1, 1, 1, (1, 1), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ];
    for (kk, case) in cases.into_iter().enumerate() {
        let (n, ci, h, wd, co, k, s, p, op, dl, g) = case;
        let seed = 610 + 3 * kk as u64;
        let (x, xv) = input(d, &[n, ci, h, wd], seed, DType::F32);
        let (w, wv) = input(d, &[ci, co / g, k.0, k.1], seed + 1, DType::F32);
        let (b, bv) = input(d, &[co], seed + 2, DType::F32);
        for has_b in [true, false] {
            let (want, shape) = ref_conv_transpose2d(&xv, &wv, has_b.then_some(&bv[..]), &case);
            let what = format!("conv_transpose2d {case:?} bias={has_b}");
            check(&what, &x.conv_transpose2d(&w, has_b.then_some(&b), s, p, op, dl, g), &shape, &want, 1e-5, 1e-5);
            let (sx, sw) = (strided_input(d, &[n, ci, h, wd], &xv, DType::F32), strided_input(d, &[ci, co / g, k.0, k.1], &wv, DType::F32));
            check(&format!("{what} strided"), &sx.conv_transpose2d(&sw, has_b.then_some(&b), s, p, op, dl, g), &shape, &want, 1e-5, 1e-5);
        }
    }
    let (x, xv) = input(d, &[1, 4, 3, 3], 630, DType::F64);
    let (w, wv) = input(d, &[4, 1, 3, 3], 631, DType::F64);
    let case = (1, 4, 3, 3, 2, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2);
    let (want, shape) = ref_conv_transpose2d(&xv, &wv, None, &case);
    check("conv_transpose2d f64", &x.conv_transpose2d(&w, None, (2, 2), (1, 1), (1, 1), (1, 1), 2), &shape, &want, 1e-12, 1e-12);
    let bad = Tensor::zeros(&[3, 1, 3, 3], DType::F64, d).unwrap();
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&bad, None, (1, 1), (0, 0), (0, 0), (1, 1), 1), &[1, 4, 3, 3], &[3, 1, 3, 3]);
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&w, None, (1, 1), (0, 0), (0, 0), (1, 1), 3), &[1, 4, 3, 3], &[4, 1, 3, 3]);
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&w, None, (2, 2), (0, 0), (2, 0), (1, 1), 1), &[1, 4, 3, 3], &[4, 1, 3, 3]);
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&w, Some(&w), (1, 1), (0, 0), (0, 0), (1, 1), 1), &[4, 1, 3, 3], &[4, 1, 3, 3]);
}

/// PyTorch's adaptive bins: `floor(i*len/out) .. ceil((i+1)*len/out)`.
fn bins(len: usize, out: usize) -> Vec<(usize, usize)> {
    (0..out).map(|i| (i * len / out, ((i + 1) * len).div_ceil(out))).collect()
}

fn ref_adaptive(x: &[f64], shape: [usize; 4], (oh, ow): (usize, usize), max: bool) -> Vec<f64> {
    let [n, c, h, w] = shape;
    let mut out = Vec::with_capacity(n * c * oh * ow);
    for nc in 0..n * c {
        for &(y0, y1) in &bins(h, oh) {
            for &(x0, x1) in &bins(w, ow) {
                let vals: Vec<f64> = (y0..y1).flat_map(|y| (x0..x1).map(move |xx| (y, xx))).map(|(y, xx)| x[(nc * h + y) * w + xx]).collect();
                out.push(if max { vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max) } else { vals.iter().sum::<f64>() / vals.len() as f64 });
            }
        }
    }
    out
}

pub fn adaptive_pools(d: &Device) {
    let cases: [([usize; 4], (usize, usize)); 7] = [
        ([2, 3, 7, 5], (3, 2)),
        ([1, 2, 8, 6], (4, 3)),
        ([1, 2, 8, 5], (4, 3)),
        ([1, 2, 9, 8], (4, 4)),
        ([1, 1, 5, 3], (7, 4)),
        ([2, 3, 6, 6], (1, 1)),
        ([1, 2, 33, 17], (5, 3)),
    ];
    for (shape, out) in cases {
        let (x, xv) = input(d, &shape, 640, DType::F32);
        let sx = strided_input(d, &shape, &xv, DType::F32);
        let oshape = [shape[0], shape[1], out.0, out.1];
        for (max, tag) in [(false, "adaptive_avg_pool2d"), (true, "adaptive_max_pool2d")] {
            let want = ref_adaptive(&xv, shape, out, max);
            let f = |t: &Tensor| if max { t.adaptive_max_pool2d(out) } else { t.adaptive_avg_pool2d(out) };
            let what = format!("{tag} {shape:?} -> {out:?}");
            check(&what, &f(&x), &oshape, &want, 1e-6, 1e-5);
            check(&format!("{what} strided"), &f(&sx), &oshape, &want, 1e-6, 1e-5);
        }
    }
    let (x, xv) = input(d, &[3, 7, 5], 641, DType::F32);
    check("adaptive_avg_pool2d [C, H, W]", &x.adaptive_avg_pool2d((3, 2)), &[3, 3, 2], &ref_adaptive(&xv, [1, 3, 7, 5], (3, 2), false), 1e-6, 1e-5);
    check("adaptive_max_pool2d [C, H, W]", &x.adaptive_max_pool2d((2, 3)), &[3, 2, 3], &ref_adaptive(&xv, [1, 3, 7, 5], (2, 3), true), 0.0, 0.0);
    for r in [x.adaptive_avg_pool2d((0, 2)), x.reshape(&[21, 5]).and_then(|t| t.adaptive_max_pool2d((2, 2)))] {
        let msg = expect_err("adaptive pool bad shape", r);
        assert!(msg.contains("adaptive_") && (msg.contains("[3, 7, 5]") || msg.contains("[21, 5]")), "{msg}");
    }
}

pub fn group_norm(d: &Device) {
    let eps = 1e-5;
    for (shape, groups) in [(&[2usize, 6, 5, 3][..], 3usize), (&[3, 4, 7], 2), (&[2, 4], 4), (&[1, 6, 2, 2, 2], 1), (&[2, 3, 33], 3)] {
        let (n, c) = (shape[0], shape[1]);
        let per = shape.iter().product::<usize>() / (n * groups);
        let spatial = per * groups / c;
        let (x, xv) = input(d, shape, 650, DType::F32);
        let (w, wv) = from_values(d, &[c], &positive_values(c, 651, 0.5, 1.5), DType::F32);
        let (b, bv) = input(d, &[c], 652, DType::F32);
        let norm = |affine: bool| -> Vec<f64> {
            // Consecutive blocks of `per` values share a group; the channel of value f is (f / spatial) % c.
            xv.chunks(per)
                .enumerate()
                .flat_map(|(gi, g)| {
                    let mean = g.iter().sum::<f64>() / per as f64;
                    let var = g.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / per as f64;
                    g.iter().enumerate().map(move |(i, v)| (gi * per + i, (v - mean) / (var + eps).sqrt()))
                })
                .map(|(f, y)| if affine { y * wv[(f / spatial) % c] + bv[(f / spatial) % c] } else { y })
                .collect()
        };
        let what = format!("group_norm {shape:?} groups {groups}");
        check(&what, &x.group_norm(groups, None, None, eps), shape, &norm(false), 1e-4, 1e-4);
        let sx = strided_input(d, shape, &xv, DType::F32);
        check(&format!("{what} affine strided"), &sx.group_norm(groups, Some(&w), Some(&b), eps), shape, &norm(true), 1e-4, 1e-4);
    }
    let (x, _) = input(d, &[2, 6, 5], 653, DType::F32);
    let w = Tensor::ones(&[4], DType::F32, d).unwrap();
    expect_shapes_err("group_norm", x.group_norm(2, Some(&w), None, eps), &[2, 6, 5], &[4]);
    expect_err("group_norm groups not dividing C", x.group_norm(4, None, None, eps));
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

pub fn dropout2d(d: &Device) {
    let p = 0.3;
    let (n, c, h, w) = (20, 30, 3, 5);
    let (x, xv) = input(d, &[n, c, h, w], 670, DType::F32);
    let out = x.dropout2d(p, true, Some(7)).unwrap().to_vec_f64().unwrap();
    let mut dropped = 0;
    for (ch, (o, v)) in out.chunks(h * w).zip(xv.chunks(h * w)).enumerate() {
        let zero = o.iter().all(|&o| o == 0.0);
        let kept = o.iter().zip(v).all(|(&o, &v)| (o - v / (1.0 - p)).abs() <= 1e-6 * (v / (1.0 - p)).abs());
        assert!(zero || kept, "dropout2d: channel {ch} is neither all zero nor all scaled: {o:?}");
        dropped += zero as usize;
    }
    let frac = dropped as f64 / (n * c) as f64;
    assert!((frac - p).abs() < 0.06, "dropout2d p = {p}: dropped {frac} of the channels");
    assert_eq!(x.dropout2d(p, true, Some(7)).unwrap().to_vec_f64().unwrap(), out, "dropout2d: same seed, same mask");
    check("dropout2d eval", &x.dropout2d(p, false, Some(7)), &[n, c, h, w], &xv, 0.0, 0.0);
    check("dropout2d p = 0", &x.dropout2d(0.0, true, None), &[n, c, h, w], &xv, 0.0, 0.0);
    check("dropout2d p = 1", &x.dropout2d(1.0, true, None), &[n, c, h, w], &vec![0.0; xv.len()], 0.0, 0.0);
    let s = strided_input(d, &[2, 3, 4, 5], &xv[..120], DType::F32);
    let so = s.dropout2d(0.5, true, Some(9)).unwrap().to_vec_f64().unwrap();
    for (o, v) in so.chunks(20).zip(xv[..120].chunks(20)) {
        assert!(o.iter().all(|&o| o == 0.0) || o.iter().zip(v).all(|(&o, &v)| (o - 2.0 * v).abs() <= 1e-6 * v.abs()), "dropout2d strided: {o:?}");
    }
    expect_err("dropout2d p = 1.5", x.dropout2d(1.5, true, None));
    expect_err("dropout2d of a 3-D input", x.reshape(&[n, c, h * w]).and_then(|t| t.dropout2d(0.5, true, None)));
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

/// Attention over `[B, L, E]`, `[B, S, E]`, `[B, S, Ev]` (batch already broadcast), with an
/// additive mask `[B, L, S]` (`-inf` drops a key).
fn ref_attention(q: &[f64], k: &[f64], v: &[f64], mask: &[f64], (b, l, s, e, ev): (usize, usize, usize, usize, usize), scale: f64) -> Vec<f64> {
    let mut out = vec![0.0; b * l * ev];
    for bi in 0..b {
        for i in 0..l {
            let scores: Vec<f64> =
                (0..s).map(|j| (0..e).map(|t| q[(bi * l + i) * e + t] * k[(bi * s + j) * e + t]).sum::<f64>() * scale + mask[(bi * l + i) * s + j]).collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let ex: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = ex.iter().sum();
            for t in 0..ev {
                out[(bi * l + i) * ev + t] = (0..s).map(|j| ex[j] / z * v[(bi * s + j) * ev + t]).sum();
            }
        }
    }
    out
}

/// The values of a tensor of `shape` broadcast to `to` (both host-side).
fn bcast(v: &[f64], shape: &[usize], to: &[usize]) -> Vec<f64> {
    (0..to.iter().product()).map(|f| v[broadcast_ravel(&unravel(f, to), shape)]).collect()
}

pub fn attention(d: &Device) {
    let (h, l, s, e, ev) = (2usize, 5usize, 7usize, 3usize, 4usize);
    let (q, qv) = input(d, &[2, h, l, e], 690, DType::F32);
    let (k, kv) = input(d, &[2, h, s, e], 691, DType::F32);
    // Values shared by the heads: [2, 1, S, Ev] broadcasts over H.
    let (v, vv) = input(d, &[2, 1, s, ev], 692, DType::F32);
    let vb = bcast(&vv, &[2, 1, s, ev], &[2, h, s, ev]);
    let dims = (2 * h, l, s, e, ev);
    let oshape = [2, h, l, ev];
    let scale = 1.0 / (e as f64).sqrt();
    let none = vec![0.0; 2 * h * l * s];
    check("attention", &q.scaled_dot_product_attention(&k, &v, None, false, None), &oshape, &ref_attention(&qv, &kv, &vb, &none, dims, scale), 1e-5, 1e-5);
    let sq = strided_input(d, &[2, h, l, e], &qv, DType::F32);
    check(
        "attention strided, scale 0.7",
        &sq.scaled_dot_product_attention(&k, &v, None, false, Some(0.7)),
        &oshape,
        &ref_attention(&qv, &kv, &vb, &none, dims, 0.7),
        1e-5,
        1e-5,
    );
    // Causal: key j <= query i.
    let causal: Vec<f64> = (0..2 * h * l * s).map(|f| if f % s <= (f / s) % l { 0.0 } else { f64::NEG_INFINITY }).collect();
    check(
        "attention causal",
        &q.scaled_dot_product_attention(&k, &v, None, true, None),
        &oshape,
        &ref_attention(&qv, &kv, &vb, &causal, dims, scale),
        1e-5,
        1e-5,
    );
    // A bool [L, S] mask broadcast over batch and heads (every query keeps key 0).
    let keep: Vec<bool> = (0..l * s).map(|f| f % s == 0 || (f * 7 + 3) % 5 < 3).collect();
    let bm = Tensor::from_f64s(&keep.iter().map(|&b| b as u8 as f64).collect::<Vec<_>>(), &[l, s], DType::Bool, d).unwrap();
    let add: Vec<f64> = keep.iter().map(|&b| if b { 0.0 } else { f64::NEG_INFINITY }).collect();
    let want = ref_attention(&qv, &kv, &vb, &bcast(&add, &[l, s], &[2, h, l, s]), dims, scale);
    check("attention bool mask [L, S]", &q.scaled_dot_product_attention(&k, &v, Some(&bm), false, None), &oshape, &want, 1e-5, 1e-5);
    // A float [2, 1, L, S] mask, added.
    let (fm, fv) = input(d, &[2, 1, l, s], 693, DType::F32);
    let want = ref_attention(&qv, &kv, &vb, &bcast(&fv, &[2, 1, l, s], &[2, h, l, s]), dims, scale);
    check("attention float mask [2, 1, L, S]", &q.scaled_dot_product_attention(&k, &v, Some(&fm), false, None), &oshape, &want, 1e-5, 1e-5);
    // 2-D operands, L > S with a causal mask (every query row keeps key 0).
    let (q2, q2v) = input(d, &[7, 3], 694, DType::F64);
    let (k2, k2v) = input(d, &[4, 3], 695, DType::F64);
    let (v2, v2v) = input(d, &[4, 2], 696, DType::F64);
    let c2: Vec<f64> = (0..28).map(|f| if f % 4 <= f / 4 { 0.0 } else { f64::NEG_INFINITY }).collect();
    let want = ref_attention(&q2v, &k2v, &v2v, &c2, (1, 7, 4, 3, 2), 1.0 / 3f64.sqrt());
    check("attention 2-D causal f64", &q2.scaled_dot_product_attention(&k2, &v2, None, true, None), &[7, 2], &want, 1e-12, 1e-12);
    // Errors name the shapes.
    let bad_k = Tensor::zeros(&[2, h, s, e + 1], DType::F32, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&bad_k, &v, None, false, None), &[2, h, l, e], &[2, h, s, e + 1]);
    let bad_v = Tensor::zeros(&[2, 1, s + 1, ev], DType::F32, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&k, &bad_v, None, false, None), &[2, h, s, e], &[2, 1, s + 1, ev]);
    let bad_m = Tensor::zeros(&[l, s + 1], DType::Bool, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&k, &v, Some(&bad_m), false, None), &[2, h, l, s], &[l, s + 1]);
    expect_err("attention mask with is_causal", q.scaled_dot_product_attention(&k, &v, Some(&bm), true, None));
    let bad_b = Tensor::zeros(&[3, h, s, e], DType::F32, d).unwrap();
    expect_shapes_err("scaled_dot_product_attention", q.scaled_dot_product_attention(&bad_b, &v, None, false, None), &[2, h, l, e], &[3, h, s, e]);
}
