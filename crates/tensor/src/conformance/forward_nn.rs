//! Forward conformance of the composite activations, softmax family, normalizations (layer,
//! batch, group) and dropout (elementwise, channel), against f64 formulas in their numerically
//! stable forms.

use super::forward::{check, expect_err, expect_shapes_err, ravel, ref_erf, unravel};
use super::{from_values, input, positive_values, strided_input, values};
use crate::{DType, Device, Result, Tensor};

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    }
}

type Act = (&'static str, fn(&Tensor) -> Result<Tensor>, fn(f64) -> f64);

fn activation_cases() -> [Act; 7] {
    [
        ("relu", |t| t.relu(), |x| x.max(0.0)),
        ("leaky_relu", |t| t.leaky_relu(0.1), |x| if x > 0.0 { x } else { 0.1 * x }),
        ("sigmoid", |t| t.sigmoid(), sigmoid),
        ("tanh", |t| t.tanh(), f64::tanh),
        ("gelu", |t| t.gelu(), |x| 0.5 * x * (1.0 + ref_erf(x / std::f64::consts::SQRT_2))),
        ("silu", |t| t.silu(), |x| x * sigmoid(x)),
        ("softplus", |t| t.softplus(), |x| x.max(0.0) + (-x.abs()).exp().ln_1p()),
    ]
}

fn run_activations(d: &Device, dtype: DType, shapes: &[&[usize]], atol: f64, rtol: f64) {
    for (name, op, reference) in activation_cases() {
        for (k, &shape) in shapes.iter().enumerate() {
            let n: usize = shape.iter().product();
            let v: Vec<f64> = values(n, 400 + k as u64).iter().map(|x| 3.0 * x).collect();
            let (t, v) = from_values(d, shape, &v, dtype);
            let want: Vec<f64> = v.iter().map(|&x| reference(x)).collect();
            let what = format!("{name} {dtype} {shape:?}");
            check(&what, &op(&t), shape, &want, atol, rtol);
            if shape.len() > 1 {
                let s = strided_input(d, shape, &v, dtype);
                check(&format!("{what} strided"), &op(&s), shape, &want, atol, rtol);
            }
        }
    }
}

pub fn activations(d: &Device) {
    run_activations(d, DType::F32, &[&[1], &[7], &[33], &[7, 33], &[3, 1001]], 1e-6, 1e-5);
    // Saturation: finite, and the right limits.
    let x = [-100.0, 100.0, -30.0, 30.0, -1e-3, 1e-3, 0.0];
    for (dtype, atol) in [(DType::F32, 1e-6), (DType::F64, 1e-12)] {
        let (t, _) = from_values(d, &[x.len()], &x, dtype);
        for (name, op, reference) in activation_cases() {
            let want: Vec<f64> = x.iter().map(|&v| reference(v)).collect();
            check(&format!("{name} {dtype} at +-100, +-30, +-1e-3, 0"), &op(&t), &[x.len()], &want, atol, 1e-5);
        }
    }
}

pub fn activations_dtypes(d: &Device) {
    // Composites round at every step: a few ulps of the dtype.
    run_activations(d, DType::F64, &[&[7], &[7, 33]], 1e-12, 1e-10);
    run_activations(d, DType::F16, &[&[7], &[7, 33]], 5e-3, 1e-2);
    run_activations(d, DType::BF16, &[&[7], &[7, 33]], 3e-2, 3e-2);
}

/// Applies `f` to each lane of `v` along `dim` (a lane in order along the axis), in place.
fn along(v: &[f64], shape: &[usize], dim: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for flat in 0..v.len() {
        let mut idx = unravel(flat, shape);
        if idx[dim] != 0 {
            continue;
        }
        let lane: Vec<usize> = (0..shape[dim])
            .map(|i| {
                idx[dim] = i;
                ravel(&idx, shape)
            })
            .collect();
        let got = f(&lane.iter().map(|&p| v[p]).collect::<Vec<_>>());
        for (p, g) in lane.into_iter().zip(got) {
            out[p] = g;
        }
    }
    out
}

fn ref_lse(g: &[f64]) -> f64 {
    let m = g.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + g.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

pub fn softmax(d: &Device) {
    // (shape, dims to test as isize), some values pushed to +-1000 so naive exp overflows.
    let cases: [(&[usize], &[isize]); 4] = [(&[7, 33], &[0, 1, -1]), (&[3, 1001], &[-1, 0]), (&[2, 7, 5], &[1, -1]), (&[1], &[0])];
    for (k, (shape, dims)) in cases.into_iter().enumerate() {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = values(n, 410 + k as u64).iter().enumerate().map(|(i, x)| if i % 5 == 2 { x.signum() * 1000.0 } else { 3.0 * x }).collect();
        let (t, v) = from_values(d, shape, &v, DType::F32);
        let s = strided_input(d, shape, &v, DType::F32);
        for &dim in dims {
            let ud = if dim < 0 { (shape.len() as isize + dim) as usize } else { dim as usize };
            let sm = along(&v, shape, ud, |g| {
                let l = ref_lse(g);
                g.iter().map(|x| (x - l).exp()).collect()
            });
            let lsm = along(&v, shape, ud, |g| {
                let l = ref_lse(g);
                g.iter().map(|x| x - l).collect()
            });
            let lse = along(&v, shape, ud, |g| vec![ref_lse(g); g.len()]);
            let mut keep = shape.to_vec();
            keep[ud] = 1;
            let lse: Vec<f64> = (0..lse.len()).filter(|&f| unravel(f, shape)[ud] == 0).map(|f| lse[f]).collect();
            let what = format!("{shape:?} dim {dim}");
            for (x, tag) in [(&t, ""), (&s, " strided")] {
                check(&format!("softmax {what}{tag}"), &x.softmax(dim), shape, &sm, 1e-6, 1e-5);
                check(&format!("log_softmax {what}{tag}"), &x.log_softmax(dim), shape, &lsm, 1e-4, 1e-5);
                check(&format!("logsumexp keepdim {what}{tag}"), &x.logsumexp(dim, true), &keep, &lse, 1e-4, 1e-6);
                let flat: Vec<usize> = shape.iter().enumerate().filter(|&(i, _)| i != ud).map(|(_, &s)| s).collect();
                check(&format!("logsumexp {what}{tag}"), &x.logsumexp(dim, false), &flat, &lse, 1e-4, 1e-6);
            }
        }
    }
    // Rows at +-1000 only: finite, exact limits.
    let (t, _) = from_values(d, &[3, 3], &[1000.0, -1000.0, 1000.0, -1000.0, -1000.0, -1000.0, 1000.0, 999.0, -1000.0], DType::F32);
    let e = (-1.0f64).exp();
    check("softmax of +-1000 rows", &t.softmax(1), &[3, 3], &[0.5, 0.0, 0.5, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / (1.0 + e), e / (1.0 + e), 0.0], 1e-6, 1e-5);
    let l3 = 3f64.ln();
    check("logsumexp of +-1000 rows", &t.logsumexp(1, false), &[3], &[1000.0 + 2f64.ln(), -1000.0 + l3, 1000.0 + (1.0 + e).ln()], 1e-4, 1e-6);
    check("log_softmax of a -1000 row", &t.narrow(0, 1, 1).and_then(|r| r.log_softmax(-1)), &[1, 3], &[-l3; 3], 1e-5, 1e-5);
}

/// `(x - mean) / sqrt(var + eps) * w + b` over consecutive groups of `m` (biased variance).
fn ref_normalize(v: &[f64], m: usize, w: Option<&[f64]>, b: Option<&[f64]>, eps: f64) -> Vec<f64> {
    v.chunks(m)
        .flat_map(|g| {
            let mean = g.iter().sum::<f64>() / m as f64;
            let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / m as f64;
            g.iter().enumerate().map(move |(i, x)| (x - mean) / (var + eps).sqrt() * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i]))
        })
        .collect()
}

pub fn layer_norm(d: &Device) {
    for (shape, nd) in [(&[4usize, 7, 33][..], 1usize), (&[4, 7, 33], 2), (&[2, 1025], 1), (&[3, 1], 1), (&[5, 3, 2, 2], 3)] {
        let m: usize = shape[shape.len() - nd..].iter().product();
        let (x, xv) = input(d, shape, 420, DType::F32);
        let sx = strided_input(d, shape, &xv, DType::F32);
        let nshape = &shape[shape.len() - nd..];
        let (w, wv) = from_values(d, nshape, &positive_values(m, 421, 0.5, 1.5), DType::F32);
        let (b, bv) = input(d, nshape, 422, DType::F32);
        let what = format!("layer_norm {shape:?} over {nd}");
        let eps = 1e-5;
        check(&what, &x.layer_norm(nd, None, None, eps), shape, &ref_normalize(&xv, m, None, None, eps), 1e-4, 1e-4);
        check(&format!("{what} weight"), &sx.layer_norm(nd, Some(&w), None, eps), shape, &ref_normalize(&xv, m, Some(&wv), None, eps), 1e-4, 1e-4);
        check(&format!("{what} bias"), &x.layer_norm(nd, None, Some(&b), eps), shape, &ref_normalize(&xv, m, None, Some(&bv), eps), 1e-4, 1e-4);
        check(
            &format!("{what} weight, bias strided"),
            &sx.layer_norm(nd, Some(&w), Some(&b), 0.1),
            shape,
            &ref_normalize(&xv, m, Some(&wv), Some(&bv), 0.1),
            1e-4,
            1e-4,
        );
    }
    let (x, xv) = input(d, &[3, 7], 423, DType::F64);
    check("layer_norm f64", &x.layer_norm(1, None, None, 1e-5), &[3, 7], &ref_normalize(&xv, 7, None, None, 1e-5), 1e-12, 1e-10);
    let (h, hv) = input(d, &[3, 33], 424, DType::F16);
    check("layer_norm f16", &h.layer_norm(1, None, None, 1e-5), &[3, 33], &ref_normalize(&hv, 33, None, None, 1e-5), 1e-2, 1e-2);
    expect_err("layer_norm weight of the wrong shape", x.layer_norm(1, Some(&x), None, 1e-5));
}

pub fn batch_norm(d: &Device) {
    let (eps, momentum) = (1e-5, 0.1);
    for shape in [&[4usize, 3, 5, 7][..], &[33, 5], &[2, 3, 1]] {
        let c = shape[1];
        let (x, xv) = input(d, shape, 430, DType::F32);
        let sx = strided_input(d, shape, &xv, DType::F32);
        // Channel c's values, in order: every axis but 1.
        let chan = |c0: usize| -> Vec<f64> { (0..xv.len()).filter(|&f| unravel(f, shape)[1] == c0).map(|f| xv[f]).collect() };
        let stats: Vec<(f64, f64, usize)> = (0..c)
            .map(|c0| {
                let g = chan(c0);
                let mean = g.iter().sum::<f64>() / g.len() as f64;
                (mean, g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64, g.len())
            })
            .collect();
        let (w, wv) = from_values(d, &[c], &positive_values(c, 431, 0.5, 1.5), DType::F32);
        let (b, bv) = input(d, &[c], 432, DType::F32);
        let (rm0, rv0) = (super::forward::rounded(&values(c, 433), DType::F32), super::forward::rounded(&positive_values(c, 434, 0.5, 2.0), DType::F32));
        let norm = |mean: &dyn Fn(usize) -> f64, var: &dyn Fn(usize) -> f64| -> Vec<f64> {
            (0..xv.len())
                .map(|f| {
                    let c0 = unravel(f, shape)[1];
                    (xv[f] - mean(c0)) / (var(c0) + eps).sqrt() * wv[c0] + bv[c0]
                })
                .collect()
        };
        let what = format!("batch_norm {shape:?}");
        for (x, tag) in [(&x, ""), (&sx, " strided")] {
            let rm = Tensor::from_f64s(&rm0, &[c], DType::F32, d).unwrap();
            let rv = Tensor::from_f64s(&rv0, &[c], DType::F32, d).unwrap();
            let out = x.batch_norm(Some(&rm), Some(&rv), Some(&w), Some(&b), true, momentum, eps);
            check(&format!("{what} training{tag}"), &out, shape, &norm(&|c0| stats[c0].0, &|c0| stats[c0].1), 1e-4, 1e-4);
            // Running stats: (1 - m) old + m batch, the variance unbiased.
            let new_rm: Vec<f64> = (0..c).map(|c0| (1.0 - momentum) * rm0[c0] + momentum * stats[c0].0).collect();
            let new_rv: Vec<f64> = (0..c)
                .map(|c0| {
                    let (_, v, n) = stats[c0];
                    (1.0 - momentum) * rv0[c0] + momentum * v * n as f64 / (n - 1) as f64
                })
                .collect();
            check(&format!("{what} running_mean{tag}"), &Ok(rm.clone()), &[c], &new_rm, 1e-6, 1e-5);
            check(&format!("{what} running_var{tag}"), &Ok(rv.clone()), &[c], &new_rv, 1e-6, 1e-5);
            // Eval uses the running stats, and leaves them alone.
            let out = x.batch_norm(Some(&rm), Some(&rv), Some(&w), Some(&b), false, momentum, eps);
            check(&format!("{what} eval{tag}"), &out, shape, &norm(&|c0| new_rm[c0], &|c0| new_rv[c0]), 1e-4, 1e-4);
            check(&format!("{what} eval keeps running_mean{tag}"), &Ok(rm), &[c], &new_rm, 1e-6, 1e-5);
        }
        // Training without running stats, weight or bias.
        let want: Vec<f64> = (0..xv.len())
            .map(|f| {
                let c0 = unravel(f, shape)[1];
                (xv[f] - stats[c0].0) / (stats[c0].1 + eps).sqrt()
            })
            .collect();
        check(&format!("{what} training, no affine"), &x.batch_norm(None, None, None, None, true, momentum, eps), shape, &want, 1e-4, 1e-4);
        expect_err(&format!("{what} eval without running stats"), x.batch_norm(None, None, None, None, false, momentum, eps));
    }
}

pub fn dropout(d: &Device) {
    let p = 0.3;
    let (x, xv) = input(d, &[100, 100], 440, DType::F32);
    let out = x.dropout(p, true, Some(7)).unwrap().to_vec_f64().unwrap();
    let mut dropped = 0;
    for (i, (&o, &v)) in out.iter().zip(&xv).enumerate() {
        let kept = (o - v / (1.0 - p)).abs() <= 1e-6 * (v / (1.0 - p)).abs();
        assert!(o == 0.0 || kept, "dropout: element {i} is {o}, neither 0 nor {v} / (1 - p)");
        dropped += (o == 0.0) as usize;
    }
    let frac = dropped as f64 / out.len() as f64;
    assert!((frac - p).abs() < 0.02, "dropout p = {p}: dropped {frac}");
    assert_eq!(x.dropout(p, true, Some(7)).unwrap().to_vec_f64().unwrap(), out, "dropout: same seed, same mask");
    let other = x.dropout(p, true, Some(8)).unwrap().to_vec_f64().unwrap();
    assert!(other.iter().zip(&out).filter(|(a, b)| a != b).count() > 1000, "dropout: seeds 7 and 8 give near-equal masks");
    let (g1, g2) = (x.dropout(p, true, None).unwrap().to_vec_f64().unwrap(), x.dropout(p, true, None).unwrap().to_vec_f64().unwrap());
    assert_ne!(g1, g2, "dropout without a seed draws a fresh mask each call");
    // Eval and p = 0 are the identity; p = 1 drops all; strided input keeps its values.
    check("dropout eval", &x.dropout(p, false, Some(7)), &[100, 100], &xv, 0.0, 0.0);
    check("dropout p = 0", &x.dropout(0.0, true, Some(7)), &[100, 100], &xv, 0.0, 0.0);
    check("dropout p = 1", &x.dropout(1.0, true, Some(7)), &[100, 100], &vec![0.0; 10_000], 0.0, 0.0);
    let s = strided_input(d, &[7, 33], &xv[..231], DType::F32);
    let so = s.dropout(0.5, true, Some(9)).unwrap().to_vec_f64().unwrap();
    assert!(so.iter().zip(&xv).all(|(&o, &v)| o == 0.0 || (o - 2.0 * v).abs() <= 1e-6 * v.abs()), "dropout strided: {so:?}");
    expect_err("dropout p = 1.5", x.dropout(1.5, true, None));
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
