//! Forward conformance of the losses with every [`Reduction`], including extreme logits.

use super::forward::{check, expect_err};
use super::{from_values, input, positive_values, strided_input, values};
use crate::{DType, Device, Reduction, Result, Tensor};

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
