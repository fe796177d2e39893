//! Forward conformance of the losses with every [`Reduction`], against PyTorch's documented
//! formulas in f64, including extreme logits and probabilities of exactly 0 and 1.

use super::forward::{check, expect_err, expect_shapes_err};
use super::{from_values, input, positive_values, strided_input, values};
use crate::{CrossEntropyOptions, DType, Device, KlReduction, Reduction, Result, Tensor};

/// Checks `got` against per-element losses `per` under `reduction` (`shape` for `None`).
#[track_caller]
pub(super) fn check_reduced(what: &str, got: Result<Tensor>, reduction: Reduction, per: &[f64], shape: &[usize], atol: f64, rtol: f64) {
    let (want, wshape): (Vec<f64>, &[usize]) = match reduction {
        Reduction::None => (per.to_vec(), shape),
        Reduction::Mean => (vec![per.iter().sum::<f64>() / per.len() as f64], &[]),
        Reduction::Sum => (vec![per.iter().sum::<f64>()], &[]),
    };
    check(&format!("{what} {reduction:?}"), &got, wshape, &want, atol, rtol);
}

const REDUCTIONS: [Reduction; 3] = [Reduction::None, Reduction::Mean, Reduction::Sum];

/// `n` seeded class indices in `0..c`, as i64 tensor and usizes.
fn targets(d: &Device, n: usize, c: usize, seed: u64) -> (Tensor, Vec<usize>) {
    let t: Vec<usize> = positive_values(n, seed, 0.0, c as f64).iter().map(|&x| (x as usize).min(c - 1)).collect();
    let ints: Vec<i64> = t.iter().map(|&x| x as i64).collect();
    (Tensor::from_slice(&ints, &[n], d).unwrap(), t)
}

fn ref_lse(row: &[f64]) -> f64 {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

fn ref_bce(x: f64, y: f64) -> f64 {
    x.max(0.0) - x * y + (-x.abs()).exp().ln_1p()
}

pub fn losses(d: &Device) {
    for (k, &(n, c)) in [(7usize, 5usize), (33, 10), (1, 1), (1100, 3)].iter().enumerate() {
        let seed = 500 + 10 * k as u64;
        let (logits, lv) = from_values(d, &[n, c], &values(n * c, seed).iter().map(|x| 3.0 * x).collect::<Vec<_>>(), DType::F32);
        let sl = strided_input(d, &[n, c], &lv, DType::F32);
        let (t, tv) = targets(d, n, c, seed + 1);
        let ce: Vec<f64> = (0..n).map(|i| ref_lse(&lv[i * c..(i + 1) * c]) - lv[i * c + tv[i]]).collect();
        let nll: Vec<f64> = (0..n).map(|i| -lv[i * c + tv[i]]).collect();
        for r in REDUCTIONS {
            let (atol, rtol) = (1e-5, 1e-5);
            check_reduced(&format!("cross_entropy [{n}, {c}]"), logits.cross_entropy(&t, r), r, &ce, &[n], atol * (n as f64).sqrt(), rtol);
            check_reduced(&format!("cross_entropy strided [{n}, {c}]"), sl.cross_entropy(&t, r), r, &ce, &[n], atol * (n as f64).sqrt(), rtol);
            check_reduced(&format!("nll_loss [{n}, {c}]"), logits.nll_loss(&t, r), r, &nll, &[n], atol * (n as f64).sqrt(), rtol);
        }
        // mse and bce on [n, c] with soft targets in [0, 1] and hard 0/1 ones.
        let (y, yv) = from_values(d, &[n, c], &positive_values(n * c, seed + 2, 0.0, 1.0), DType::F32);
        let (p, pv) = input(d, &[n, c], seed + 3, DType::F32);
        let mse: Vec<f64> = pv.iter().zip(&yv).map(|(a, b)| (a - b).powi(2)).collect();
        let bce: Vec<f64> = lv.iter().zip(&yv).map(|(&x, &y)| ref_bce(x, y)).collect();
        let hard: Vec<f64> = (0..n * c).map(|i| (i % 3 == 0) as u8 as f64).collect();
        let (h, _) = from_values(d, &[n, c], &hard, DType::F32);
        let bce_hard: Vec<f64> = lv.iter().zip(&hard).map(|(&x, &y)| ref_bce(x, y)).collect();
        for r in REDUCTIONS {
            let atol = 1e-5 * (n as f64).sqrt();
            check_reduced(&format!("mse_loss [{n}, {c}]"), p.mse_loss(&y, r), r, &mse, &[n, c], atol, 1e-5);
            let sp = strided_input(d, &[n, c], &pv, DType::F32);
            check_reduced(&format!("mse_loss strided [{n}, {c}]"), sp.mse_loss(&y, r), r, &mse, &[n, c], atol, 1e-5);
            check_reduced(&format!("bce_with_logits soft [{n}, {c}]"), logits.bce_with_logits(&y, r), r, &bce, &[n, c], atol, 1e-5);
            check_reduced(&format!("bce_with_logits hard strided [{n}, {c}]"), sl.bce_with_logits(&h, r), r, &bce_hard, &[n, c], atol, 1e-5);
        }
    }
    // f64 and f16 cross-entropy.
    for (dtype, atol, rtol) in [(DType::F64, 1e-12, 1e-10), (DType::F16, 1e-2, 1e-2), (DType::BF16, 5e-2, 3e-2)] {
        let (logits, lv) = input(d, &[7, 5], 560, dtype);
        let (t, tv) = targets(d, 7, 5, 561);
        let ce: Vec<f64> = (0..7).map(|i| ref_lse(&lv[i * 5..(i + 1) * 5]) - lv[i * 5 + tv[i]]).collect();
        for r in REDUCTIONS {
            check_reduced(&format!("cross_entropy {dtype}"), logits.cross_entropy(&t, r), r, &ce, &[7], atol, rtol);
        }
    }
}

pub fn losses_extreme(d: &Device) {
    // Logits at +-1000: finite losses, exact values.
    let (logits, _) = from_values(d, &[3, 3], &[1000.0, -1000.0, 0.0, -1000.0, -1000.0, -1000.0, 1000.0, 999.0, -1000.0], DType::F32);
    let t = Tensor::from_slice(&[1i64, 2, 1], &[3], d).unwrap();
    let e = (-1.0f64).exp();
    let want = [2000.0, 3f64.ln(), 1.0 + (1.0 + e).ln()];
    for r in REDUCTIONS {
        check_reduced("cross_entropy at +-1000", logits.cross_entropy(&t, r), r, &want, &[3], 1e-3, 1e-6);
    }
    // bce_with_logits at x = +-100 with y = 0 and 1.
    let (x, _) = from_values(d, &[6], &[100.0, 100.0, -100.0, -100.0, 30.0, -30.0], DType::F32);
    let (y, _) = from_values(d, &[6], &[1.0, 0.0, 1.0, 0.0, 0.5, 0.5], DType::F32);
    let want: Vec<f64> = [(100.0, 1.0), (100.0, 0.0), (-100.0, 1.0), (-100.0, 0.0), (30.0, 0.5), (-30.0, 0.5)].iter().map(|&(x, y)| ref_bce(x, y)).collect();
    for r in REDUCTIONS {
        check_reduced("bce_with_logits at +-100", x.bce_with_logits(&y, r), r, &want, &[6], 1e-5, 1e-6);
    }
    // Bad inputs are errors.
    let (l, _) = input(d, &[2, 3], 570, DType::F32);
    // Bad class indices surface at the next read on an asynchronous backend.
    expect_err("nll_loss target 3 of 3 classes", l.nll_loss(&Tensor::from_slice(&[0i64, 3], &[2], d).unwrap(), Reduction::Mean).and_then(|t| t.to_vec_f64()));
    expect_err("cross_entropy target -1", l.cross_entropy(&Tensor::from_slice(&[-1i64, 0], &[2], d).unwrap(), Reduction::Mean).and_then(|t| t.to_vec_f64()));
    expect_err("cross_entropy f32 targets", l.cross_entropy(&Tensor::zeros(&[2], DType::F32, d).unwrap(), Reduction::Mean));
    expect_err("cross_entropy target count", l.cross_entropy(&Tensor::zeros(&[3], DType::I64, d).unwrap(), Reduction::Mean));
    expect_err("mse_loss shape mismatch", l.mse_loss(&Tensor::zeros(&[3, 2], DType::F32, d).unwrap(), Reduction::Mean));
    expect_err("bce_with_logits shape mismatch", l.bce_with_logits(&Tensor::zeros(&[2], DType::F32, d).unwrap(), Reduction::Sum));
}

pub fn l1_loss(d: &Device) {
    for shape in [vec![7usize], vec![4, 33], vec![2, 3, 5]] {
        let (x, xv) = input(d, &shape, 700, DType::F32);
        let (y, yv) = input(d, &shape, 701, DType::F32);
        let per: Vec<f64> = xv.iter().zip(&yv).map(|(a, b)| (a - b).abs()).collect();
        let sx = strided_input(d, &shape, &xv, DType::F32);
        for r in REDUCTIONS {
            check_reduced(&format!("l1_loss {shape:?}"), x.l1_loss(&y, r), r, &per, &shape, 1e-5, 1e-5);
            check_reduced(&format!("l1_loss strided {shape:?}"), sx.l1_loss(&y, r), r, &per, &shape, 1e-5, 1e-5);
        }
    }
    let (x, _) = input(d, &[3, 4], 702, DType::F32);
    expect_shapes_err("l1_loss", x.l1_loss(&Tensor::zeros(&[4, 3], DType::F32, d).unwrap(), Reduction::Mean), &[3, 4], &[4, 3]);
}

/// PyTorch's `binary_cross_entropy`: each log clamped to `>= -100`.
fn ref_bce_prob(p: f64, y: f64) -> f64 {
    let clog = |v: f64| if v > 0.0 { v.ln().max(-100.0) } else { -100.0 };
    -(y * clog(p) + (1.0 - y) * clog(1.0 - p))
}

pub fn bce_loss(d: &Device) {
    for shape in [vec![7usize], vec![33, 5]] {
        let n: usize = shape.iter().product();
        let (p, pv) = from_values(d, &shape, &positive_values(n, 710, 0.02, 0.98), DType::F32);
        let (y, yv) = from_values(d, &shape, &positive_values(n, 711, 0.0, 1.0), DType::F32);
        let per: Vec<f64> = pv.iter().zip(&yv).map(|(&p, &y)| ref_bce_prob(p, y)).collect();
        let sp = strided_input(d, &shape, &pv, DType::F32);
        for r in REDUCTIONS {
            check_reduced(&format!("bce_loss {shape:?}"), p.bce_loss(&y, r), r, &per, &shape, 1e-5, 1e-5);
            check_reduced(&format!("bce_loss strided {shape:?}"), sp.bce_loss(&y, r), r, &per, &shape, 1e-5, 1e-5);
        }
    }
    // Probabilities of exactly 0 and 1: the clamp makes every loss and gradient finite.
    let pv = [0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1e-30, 0.5];
    let yv = [1.0, 0.0, 1.0, 0.0, 0.5, 0.5, 1.0, 1.0];
    for dtype in [DType::F32, DType::F64] {
        let (p, pr) = from_values(d, &[8], &pv, dtype);
        let want: Vec<f64> = pr.iter().zip(&yv).map(|(&p, &y)| ref_bce_prob(p, y)).collect();
        assert_eq!(&want[..6], &[100.0, 0.0, 0.0, 100.0, 50.0, 50.0]);
        let (y, _) = from_values(d, &[8], &yv, dtype);
        for r in REDUCTIONS {
            check_reduced(&format!("bce_loss {dtype} at p = 0 and 1"), p.bce_loss(&y, r), r, &want, &[8], 1e-4, 1e-6);
        }
        let p = p.requires_grad_(true).unwrap();
        p.bce_loss(&y, Reduction::Sum).and_then(|l| l.backward()).unwrap();
        let g = p.grad().unwrap().to_vec_f64().unwrap();
        assert!(g.iter().all(|v| v.is_finite()), "bce_loss {dtype}: gradient at p = 0 and 1 must be finite, got {g:?}");
    }
    let (p, _) = input(d, &[3, 4], 712, DType::F32);
    expect_shapes_err("bce_loss", p.bce_loss(&Tensor::zeros(&[12], DType::F32, d).unwrap(), Reduction::Mean), &[3, 4], &[12]);
}

/// PyTorch's `kl_div` pointwise: `t (log t - x)`, 0 at `t = 0`; or `exp(t) (t - x)` for log targets.
fn ref_kl(x: f64, t: f64, log_target: bool) -> f64 {
    if log_target {
        t.exp() * (t - x)
    } else if t == 0.0 {
        0.0
    } else {
        t * (t.ln() - x)
    }
}

pub fn kl_div(d: &Device) {
    let (n, c) = (5usize, 7usize);
    let (x, xv) = input(d, &[n, c], 720, DType::F32);
    // Targets with exact zeros every third element.
    let tv: Vec<f64> = positive_values(n * c, 721, 0.01, 1.0).iter().enumerate().map(|(i, &v)| if i % 3 == 0 { 0.0 } else { v }).collect();
    let (t, tv) = from_values(d, &[n, c], &tv, DType::F32);
    let (lt, ltv) = input(d, &[n, c], 722, DType::F32);
    let sx = strided_input(d, &[n, c], &xv, DType::F32);
    for (log_target, target, tvals) in [(false, &t, &tv), (true, &lt, &ltv)] {
        let per: Vec<f64> = xv.iter().zip(tvals.iter()).map(|(&x, &t)| ref_kl(x, t, log_target)).collect();
        let what = format!("kl_div log_target={log_target}");
        for r in REDUCTIONS {
            check_reduced(&what, x.kl_div(target, r, log_target), r, &per, &[n, c], 1e-5, 1e-5);
            check_reduced(&format!("{what} strided"), sx.kl_div(target, r, log_target), r, &per, &[n, c], 1e-5, 1e-5);
        }
        let batchmean = per.iter().sum::<f64>() / n as f64;
        check(&format!("{what} batchmean"), &x.kl_div(target, KlReduction::BatchMean, log_target), &[], &[batchmean], 1e-5, 1e-5);
        assert!(per.iter().all(|v| v.is_finite()));
    }
    // Target 0 with a very negative input, and its gradient, stay finite.
    let (x0, _) = from_values(d, &[4], &[-200.0, 0.3, -1.0, -50.0], DType::F32);
    let (t0, _) = from_values(d, &[4], &[0.0, 0.0, 1.0, 0.5], DType::F32);
    let want = [0.0, 0.0, 1.0, 0.5 * (0.5f64.ln() + 50.0)];
    check("kl_div at target 0", &x0.kl_div(&t0, KlReduction::None, false), &[4], &want, 1e-5, 1e-6);
    let (x0, t0) = (x0.requires_grad_(true).unwrap(), t0.requires_grad_(true).unwrap());
    x0.kl_div(&t0, KlReduction::Sum, false).and_then(|l| l.backward()).unwrap();
    for g in [x0.grad().unwrap(), t0.grad().unwrap()] {
        let g = g.to_vec_f64().unwrap();
        assert!(g.iter().all(|v| v.is_finite()), "kl_div: gradients at target 0 must be finite, got {g:?}");
    }
    expect_shapes_err("kl_div", x.kl_div(&Tensor::zeros(&[n], DType::F32, d).unwrap(), Reduction::Sum, false), &[n, c], &[n]);
}

/// Cross-entropy with PyTorch's options, on `[M, C]` rows: per row
/// `(1 - ε) (-w[y] logp[y]) + ε / C sum_c (-w[c] logp[c])`, 0 when ignored; `Mean` divides by
/// the sum of `w[y]` over rows not ignored. Returns per-row values and that divisor.
fn ref_ce(logits: &[f64], c: usize, targets: &[i64], w: Option<&[f64]>, ignore: Option<i64>, eps: f64) -> (Vec<f64>, f64) {
    let wt = |k: usize| w.map_or(1.0, |w| w[k]);
    let mut denom = 0.0;
    let per = targets
        .iter()
        .enumerate()
        .map(|(n, &y)| {
            if Some(y) == ignore {
                return 0.0;
            }
            let row = &logits[n * c..(n + 1) * c];
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            let y = y as usize;
            denom += wt(y);
            let smooth: f64 = (0..c).map(|k| -wt(k) * (row[k] - lse)).sum();
            (1.0 - eps) * (-wt(y) * (row[y] - lse)) + eps / c as f64 * smooth
        })
        .collect();
    (per, denom)
}

#[track_caller]
fn check_ce(what: &str, got: Result<Tensor>, r: Reduction, (per, denom): &(Vec<f64>, f64), shape: &[usize], tol: f64) {
    let (want, wshape): (Vec<f64>, &[usize]) = match r {
        Reduction::None => (per.clone(), shape),
        Reduction::Mean => (vec![per.iter().sum::<f64>() / denom], &[]),
        Reduction::Sum => (vec![per.iter().sum::<f64>()], &[]),
    };
    check(&format!("{what} {r:?}"), &got, wshape, &want, tol, tol);
}

pub fn cross_entropy_with(d: &Device) {
    // By hand: logits [[0, 0], [ln 3, 0]], targets [0, 1], weight [1, 3], ε = 0.2, so
    // logp = [[-ln 2, -ln 2], [ln 3/4, ln 1/4]];
    // row 0: 0.8 * ln 2 + 0.1 * 4 ln 2 = 1.2 ln 2;
    // row 1: 0.8 * 3 ln 4 + 0.1 * (ln 4/3 + 3 ln 4) = 2.7 ln 4 + 0.1 ln 4/3; mean divides by 1 + 3.
    let (l2, l4, l43) = (2f64.ln(), 4f64.ln(), (4.0f64 / 3.0).ln());
    let (logits, _) = from_values(d, &[2, 2], &[0.0, 0.0, 3f64.ln(), 0.0], DType::F64);
    let (w, _) = from_values(d, &[2], &[1.0, 3.0], DType::F64);
    let t = Tensor::from_slice(&[0i64, 1], &[2], d).unwrap();
    let opts = CrossEntropyOptions { weight: Some(&w), ignore_index: None, label_smoothing: 0.2 };
    let rows = [1.2 * l2, 2.7 * l4 + 0.1 * l43];
    check("cross_entropy_with by hand, none", &logits.cross_entropy_with(&t, opts, Reduction::None), &[2], &rows, 1e-12, 1e-12);
    check("cross_entropy_with by hand, mean", &logits.cross_entropy_with(&t, opts, Reduction::Mean), &[], &[(rows[0] + rows[1]) / 4.0], 1e-12, 1e-12);
    let opts = CrossEntropyOptions { ignore_index: Some(1), ..opts };
    check("cross_entropy_with by hand, row 1 ignored", &logits.cross_entropy_with(&t, opts, Reduction::Mean), &[], &[1.2 * l2], 1e-12, 1e-12);

    // Seeded logits; targets include the ignored index -100 and a valid class ignored as well.
    let (n, c) = (33usize, 5usize);
    let (x, xv) = from_values(d, &[n, c], &values(n * c, 730).iter().map(|v| 3.0 * v).collect::<Vec<_>>(), DType::F32);
    let sx = strided_input(d, &[n, c], &xv, DType::F32);
    let tv: Vec<i64> =
        positive_values(n, 731, 0.0, c as f64).iter().enumerate().map(|(i, &v)| if i % 7 == 3 { -100 } else { (v as i64).min(c as i64 - 1) }).collect();
    let (w, wv) = from_values(d, &[c], &positive_values(c, 732, 0.2, 2.0), DType::F32);
    for (weight, ignore, eps) in [(false, None, 0.0), (true, None, 0.0), (false, Some(-100), 0.1), (true, Some(-100), 0.25), (true, Some(2), 0.3)] {
        if ignore.is_none() && tv.contains(&-100) {
            // Without ignore_index, -100 is an invalid class: use the valid rows only.
            let keep: Vec<usize> = (0..n).filter(|&i| tv[i] >= 0).collect();
            let kx: Vec<f64> = keep.iter().flat_map(|&i| xv[i * c..(i + 1) * c].to_vec()).collect();
            let kt: Vec<i64> = keep.iter().map(|&i| tv[i]).collect();
            let (kxt, _) = from_values(d, &[keep.len(), c], &kx, DType::F32);
            let ktt = Tensor::from_slice(&kt, &[keep.len()], d).unwrap();
            let opts = CrossEntropyOptions { weight: weight.then_some(&w), ignore_index: None, label_smoothing: eps };
            let want = ref_ce(&kx, c, &kt, weight.then_some(&wv[..]), None, eps);
            let nll_want = ref_ce(&kx, c, &kt, weight.then_some(&wv[..]), None, 0.0);
            let logp = kxt.log_softmax(1usize).unwrap();
            for r in REDUCTIONS {
                check_ce(&format!("cross_entropy_with weight={weight}"), kxt.cross_entropy_with(&ktt, opts, r), r, &want, &[keep.len()], 1e-5);
                check_ce(&format!("nll_loss_with weight={weight}"), logp.nll_loss_with(&ktt, weight.then_some(&w), None, r), r, &nll_want, &[keep.len()], 1e-5);
            }
            if !weight {
                // No options at all: the plain cross_entropy.
                let plain = ref_ce(&kx, c, &kt, None, None, 0.0);
                check_reduced(
                    "cross_entropy_with default = cross_entropy",
                    kxt.cross_entropy_with(&ktt, CrossEntropyOptions::default(), Reduction::Mean),
                    Reduction::Mean,
                    &plain.0,
                    &[keep.len()],
                    1e-5,
                    1e-5,
                );
            }
            continue;
        }
        // Ignoring the valid class 2: the -100 rows become class 2 too.
        let tv: Vec<i64> = tv.iter().map(|&y| if y < 0 { ignore.unwrap_or(y) } else { y }).collect();
        let t = Tensor::from_slice(&tv, &[n], d).unwrap();
        let opts = CrossEntropyOptions { weight: weight.then_some(&w), ignore_index: ignore, label_smoothing: eps };
        let want = ref_ce(&xv, c, &tv, weight.then_some(&wv[..]), ignore, eps);
        for r in REDUCTIONS {
            let what = format!("cross_entropy_with weight={weight} ignore={ignore:?} smoothing={eps}");
            check_ce(&what, x.cross_entropy_with(&t, opts, r), r, &want, &[n], 1e-5);
            check_ce(&format!("{what} strided"), sx.cross_entropy_with(&t, opts, r), r, &want, &[n], 1e-5);
            if eps == 0.0 || ignore == Some(2) {
                let nll_want = ref_ce(&xv, c, &tv, weight.then_some(&wv[..]), ignore, 0.0);
                let logp = x.log_softmax(1usize).unwrap();
                check_ce(
                    &format!("nll_loss_with weight={weight} ignore={ignore:?}"),
                    logp.nll_loss_with(&t, weight.then_some(&w), ignore, r),
                    r,
                    &nll_want,
                    &[n],
                    1e-5,
                );
            }
        }
    }

    // [N, C, d] logits with [N, d] targets: the class axis is dim 1.
    let (n, c, k) = (3usize, 4usize, 5usize);
    let (x3, x3v) = input(d, &[n, c, k], 733, DType::F32);
    let t3v: Vec<i64> = (0..n * k).map(|i| if i % 4 == 1 { -1 } else { (i * 7 % c) as i64 }).collect();
    let t3 = Tensor::from_slice(&t3v, &[n, k], d).unwrap();
    // Rows in [N, d] order, classes gathered from dim 1.
    let rows: Vec<f64> = (0..n * k).flat_map(|r| (0..c).map(move |cl| (r, cl))).map(|(r, cl)| x3v[((r / k) * c + cl) * k + r % k]).collect();
    let (w4, w4v) = from_values(d, &[c], &positive_values(c, 734, 0.5, 1.5), DType::F32);
    let want = ref_ce(&rows, c, &t3v, Some(&w4v), Some(-1), 0.15);
    let opts = CrossEntropyOptions { weight: Some(&w4), ignore_index: Some(-1), label_smoothing: 0.15 };
    for r in REDUCTIONS {
        check_ce("cross_entropy_with [N, C, d]", x3.cross_entropy_with(&t3, opts, r), r, &want, &[n, k], 1e-5);
    }

    // Errors: shapes, dtypes, out-of-range classes and smoothing.
    let (l, _) = input(d, &[2, 3], 735, DType::F32);
    let t2 = Tensor::from_slice(&[0i64, 2], &[2], d).unwrap();
    let w2 = Tensor::ones(&[4], DType::F32, d).unwrap();
    expect_shapes_err(
        "cross_entropy",
        l.cross_entropy_with(&t2, CrossEntropyOptions { weight: Some(&w2), ..Default::default() }, Reduction::Mean),
        &[2, 3],
        &[4],
    );
    let t3b = Tensor::from_slice(&[0i64, 1, 2], &[3], d).unwrap();
    expect_shapes_err("cross_entropy", l.cross_entropy_with(&t3b, CrossEntropyOptions::default(), Reduction::Mean), &[2, 3], &[3]);
    expect_shapes_err("nll_loss", l.nll_loss_with(&t3b, None, None, Reduction::Sum), &[2, 3], &[3]);
    expect_err("cross_entropy_with f32 targets", l.cross_entropy_with(&l, CrossEntropyOptions::default(), Reduction::Mean));
    expect_err(
        "cross_entropy_with smoothing 1.5",
        l.cross_entropy_with(&t2, CrossEntropyOptions { label_smoothing: 1.5, ..Default::default() }, Reduction::Mean),
    );
    let bad = Tensor::from_slice(&[0i64, 3], &[2], d).unwrap();
    expect_err(
        "cross_entropy_with class 3 of 3",
        l.cross_entropy_with(&bad, CrossEntropyOptions { ignore_index: Some(-100), ..Default::default() }, Reduction::Mean).and_then(|t| t.to_vec_f64()),
    );
}
