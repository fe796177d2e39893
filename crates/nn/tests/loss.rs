//! The loss modules against PyTorch: every case of `tests/data/make_loss_fixtures.py`
//! (torch 2.15.0; its docstring lists the keys), loss and input gradient, on every device; the
//! VAE whose saturated sigmoid makes BCE NaN on some GPUs; PyTorch's defaults, buffers, and
//! errors for bad shapes and dtypes.

mod common;

use std::collections::HashMap;

use common::{devices, fixture, gpu, rel_err};
use liandan_nn::layers::Linear;
use liandan_nn::loss::{BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss};
use liandan_nn::{DType, Device, Forward, KlReduction, ModuleExt, Reduction, Tensor};

type R = liandan_nn::Result<()>;

/// Tolerances on `rel_err` (max abs error over the reference's max abs value, floor 1e-3),
/// against references computed in float64. Measured maxima over every case: CPU 1.1e-7 (loss)
/// and 2.3e-7 (gradient), lavapipe 1.9e-7 and 2.9e-7: float32 rounding. The margin (30x) is
/// for GPUs whose drivers fuse multiply-adds or use faster transcendentals.
const TOL: f64 = 1e-5;

/// The fixture script's `CASES` table: name, module, reduction, ignore_index, label smoothing,
/// log_target. Weights and `pos_weight` come from the file where the case has them.
#[allow(clippy::type_complexity)] // one row per case, as the fixture script writes it
const CASES: &[(&str, &str, &str, Option<i64>, f64, bool)] = &[
    ("ce_mean", "ce", "mean", None, 0.0, false),
    ("ce_sum", "ce", "sum", None, 0.0, false),
    ("ce_none", "ce", "none", None, 0.0, false),
    ("ce_default_ignore", "ce", "mean", None, 0.0, false),
    ("ce_all_mean", "ce", "mean", Some(2), 0.1, false),
    ("ce_all_sum", "ce", "sum", Some(2), 0.1, false),
    ("ce_all_none", "ce", "none", Some(2), 0.1, false),
    ("ce_smooth", "ce", "mean", None, 0.25, false),
    ("ce_kdim_mean", "ce", "mean", None, 0.0, false),
    ("ce_kdim_all", "ce", "none", Some(1), 0.2, false),
    ("ce_kdim2_sum", "ce", "sum", None, 0.0, false),
    ("ce_unbatched", "ce", "mean", None, 0.0, false),
    ("ce_prob_mean", "ce", "mean", None, 0.0, false),
    ("ce_prob_all", "ce", "none", None, 0.1, false),
    ("ce_prob_kdim_sum", "ce", "sum", None, 0.3, false),
    ("nll_mean", "nll", "mean", None, 0.0, false),
    ("nll_weight_mean", "nll", "mean", None, 0.0, false),
    ("nll_weight_sum", "nll", "sum", None, 0.0, false),
    ("nll_weight_ignore_none", "nll", "none", Some(0), 0.0, false),
    ("nll_kdim_weight_mean", "nll", "mean", Some(3), 0.0, false),
    ("mse_mean", "mse", "mean", None, 0.0, false),
    ("mse_sum", "mse", "sum", None, 0.0, false),
    ("mse_none", "mse", "none", None, 0.0, false),
    ("l1_mean", "l1", "mean", None, 0.0, false),
    ("l1_sum", "l1", "sum", None, 0.0, false),
    ("l1_none", "l1", "none", None, 0.0, false),
    ("bce_mean", "bce", "mean", None, 0.0, false),
    ("bce_weight_none", "bce", "none", None, 0.0, false),
    ("bce_weight_sum", "bce", "sum", None, 0.0, false),
    ("bce_edge_sum", "bce", "sum", None, 0.0, false),
    ("bce_edge_none", "bce", "none", None, 0.0, false),
    ("bcel_mean", "bcel", "mean", None, 0.0, false),
    ("bcel_weight_none", "bcel", "none", None, 0.0, false),
    ("bcel_zero_logits_sum", "bcel", "sum", None, 0.0, false),
    ("bcel_pos_weight_mean", "bcel", "mean", None, 0.0, false),
    ("bcel_pos_weight_large_none", "bcel", "none", None, 0.0, false),
    ("bcel_pos_weight_large_sum", "bcel", "sum", None, 0.0, false),
    ("kl_batchmean", "kl", "batchmean", None, 0.0, false),
    ("kl_batchmean_logt", "kl", "batchmean", None, 0.0, true),
    ("kl_mean", "kl", "mean", None, 0.0, false),
    ("kl_sum_logt", "kl", "sum", None, 0.0, true),
    ("kl_none", "kl", "none", None, 0.0, false),
    ("kl_none_logt", "kl", "none", None, 0.0, true),
];

fn reduction(r: &str) -> Reduction {
    match r {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        _ => Reduction::Mean,
    }
}

/// The case's module applied to `x`, built as a user would from the table row.
fn forward(row: &(&str, &str, &str, Option<i64>, f64, bool), f: &HashMap<String, Tensor>, x: &Tensor) -> liandan_nn::Result<Tensor> {
    let &(name, module, red, ignore, smoothing, log_target) = row;
    let get = |k: &str| f.get(&format!("{name}.{k}")).cloned();
    let y = &get("target").unwrap();
    let (weight, pos_weight) = (get("weight"), get("pos_weight"));
    match module {
        "ce" => {
            let mut m = CrossEntropyLoss::new().with_reduction(reduction(red)).with_label_smoothing(smoothing);
            m.weight = weight;
            if let Some(i) = ignore {
                m = m.with_ignore_index(i);
            }
            m.forward(x, y)
        }
        "nll" => {
            let mut m = NLLLoss { weight, ..NLLLoss::new() }.with_reduction(reduction(red));
            if let Some(i) = ignore {
                m = m.with_ignore_index(i);
            }
            m.forward(x, y)
        }
        "mse" => MSELoss::new().with_reduction(reduction(red)).forward(x, y),
        "l1" => L1Loss::new().with_reduction(reduction(red)).forward(x, y),
        "bce" => BCELoss { weight, reduction: reduction(red) }.forward(x, y),
        "bcel" => BCEWithLogitsLoss { weight, pos_weight, reduction: reduction(red) }.forward(x, y),
        "kl" => {
            let r = if red == "batchmean" { KlReduction::BatchMean } else { reduction(red).into() };
            KLDivLoss::new().with_reduction(r).with_log_target(log_target).forward(x, y)
        }
        _ => unreachable!("unknown module {module}"),
    }
}

#[test]
fn every_fixture_case_is_in_the_table() {
    let f = fixture("loss_cases.safetensors", &Device::cpu());
    let mut in_file: Vec<&str> = f.keys().filter_map(|k| k.strip_suffix(".loss")).collect();
    let mut in_table: Vec<&str> = CASES.iter().map(|c| c.0).collect();
    in_file.sort();
    in_table.sort();
    assert_eq!(in_file, in_table);
}

#[test]
fn losses_and_gradients_match_pytorch() -> R {
    for dev in devices() {
        let f = fixture("loss_cases.safetensors", &dev);
        let (mut worst_loss, mut worst_grad) = ((0.0, ""), (0.0, ""));
        for row in CASES {
            let name = row.0;
            let x = f[&format!("{name}.input")].detach().requires_grad_(true)?;
            let out = forward(row, &f, &x)?;
            let want = &f[&format!("{name}.loss")];
            let e = rel_err(&out, want, 1e-3);
            assert!(e <= TOL, "{dev:?} {name}: loss rel err {e:.3e}");
            if e >= worst_loss.0 {
                worst_loss = (e, name);
            }
            match f.get(&format!("{name}.gy")) {
                Some(gy) => out.mul(gy)?.sum_all()?.backward()?,
                None => out.backward()?,
            }
            let (mut got, mut want) = (x.grad().expect("input gradient"), f[&format!("{name}.grad")].clone());
            if name.starts_with("bce_edge") {
                (got, want) = edge_gradients(&x, &f[&format!("{name}.target")], f.get(&format!("{name}.gy")), &got, &want)?;
            }
            let e = rel_err(&got, &want, 1e-3);
            assert!(e <= TOL, "{dev:?} {name}: gradient rel err {e:.3e}\n got {:?}\nwant {:?}", got.to_vec_f64()?, want.to_vec_f64()?);
            if e >= worst_grad.0 {
                worst_grad = (e, name);
            }
        }
        eprintln!("{dev:?}: worst loss rel err {:.2e} ({}), worst gradient {:.2e} ({})", worst_loss.0, worst_loss.1, worst_grad.0, worst_grad.1);
    }
    Ok(())
}

/// Where p is exactly 0 or 1, PyTorch's BCE backward is `(p - y) / max(p (1 - p), 1e-12)`
/// (up to 1e12); liandan's is the derivative of the clamped loss it computes: `1 - y` at
/// p = 0 and `-y` at p = 1. Returns (got, want) with PyTorch's values replaced there by those.
fn edge_gradients(p: &Tensor, y: &Tensor, gy: Option<&Tensor>, got: &Tensor, torch: &Tensor) -> liandan_nn::Result<(Tensor, Tensor)> {
    let (p, y, torch) = (p.to_vec_f64()?, y.to_vec_f64()?, torch.to_vec_f64()?);
    let gy = match gy {
        Some(g) => g.to_vec_f64()?,
        None => vec![1.0; p.len()],
    };
    let want: Vec<f64> = (0..p.len())
        .map(|i| {
            if p[i] == 0.0 {
                (1.0 - y[i]) * gy[i]
            } else if p[i] == 1.0 {
                -y[i] * gy[i]
            } else {
                torch[i]
            }
        })
        .collect();
    assert!(got.to_vec_f64()?.iter().all(|g| g.is_finite()));
    Ok((got.clone(), Tensor::from_f64s(&want, got.shape(), DType::F32, got.device())?))
}

/// The VAE that goes NaN on Apple's GPU: a decoder whose logits reach ±200 makes the f32
/// sigmoid exactly 0.0 and 1.0, and BCE of those (log 0) plus the KL term must stay finite,
/// with finite gradients for every parameter, on every device.
#[test]
fn vae_with_saturated_sigmoid_stays_finite() -> R {
    for dev in devices() {
        let t = |v: Vec<f32>, s: &[usize]| -> liandan_nn::Result<Tensor> { Ok(Tensor::from_vec(v, s, &dev)?) };
        // Encoder outputs for 2 samples with 2 latent dims, log-variances from -10 to 10.
        let mu = t(vec![0.5, -1.0, 3.0, 0.0], &[2, 2])?.requires_grad_(true)?;
        let lv = t(vec![-10.0, 0.0, 10.0, -0.5], &[2, 2])?.requires_grad_(true)?;
        let eps = t(vec![0.3, -0.7, 0.1, 1.2], &[2, 2])?;
        // Decoder weights large enough that most logits land beyond ±88, where the f32
        // sigmoid rounds to exactly 0 or 1.
        let weight = t(vec![400.0, 0.0, -400.0, 0.0, 0.0, 400.0, 0.0, -400.0, 0.01, 0.01], &[5, 2])?.requires_grad_(true)?;
        let bias = t(vec![0.0, 0.0, 0.0, 0.0, 0.2], &[5])?.requires_grad_(true)?;
        let decoder = Linear { weight: weight.clone(), bias: Some(bias.clone()) };
        let x = t(vec![0.0, 1.0, 0.3, 1.0, 0.5, 1.0, 0.0, 0.7, 0.0, 0.2], &[2, 5])?;

        let z = mu.add(&lv.mul_scalar(0.5)?.exp()?.mul(&eps)?)?;
        let recon = decoder.forward(&z)?.sigmoid()?;
        let p = recon.to_vec::<f32>()?;
        assert!(p.contains(&0.0) && p.contains(&1.0), "{dev:?}: the sigmoid did not saturate: {p:?}");
        let bce = BCELoss::new().with_reduction(Reduction::Sum).forward(&recon, &x)?;
        let kl = lv.add_scalar(1.0)?.sub(&mu.square()?)?.sub(&lv.exp()?)?.sum_all()?.mul_scalar(-0.5)?;
        let loss = bce.add(&kl)?;

        // The same in f64 on the host from the f32 probabilities, with PyTorch's clamp at -100.
        let xs = x.to_vec_f64()?;
        let clog = |v: f64| if v > 0.0 { v.ln().max(-100.0) } else { -100.0 };
        let want_bce: f64 = p.iter().zip(&xs).map(|(&p, &y)| -(y * clog(p as f64) + (1.0 - y) * clog(1.0 - p as f64))).sum();
        let (m, l) = (mu.to_vec_f64()?, lv.to_vec_f64()?);
        let want_kl: f64 = -0.5 * m.iter().zip(&l).map(|(m, l)| 1.0 + l - m * m - l.exp()).sum::<f64>();
        let got = loss.to_vec_f64()?[0];
        assert!(got.is_finite(), "{dev:?}: loss {got}");
        let want = want_bce + want_kl;
        assert!((got - want).abs() <= 1e-5 * want.abs(), "{dev:?}: loss {got}, want {want}");

        loss.backward()?;
        for (name, p) in [("mu", &mu), ("logvar", &lv), ("weight", &weight), ("bias", &bias)] {
            let g = p.grad().expect("gradient").to_vec_f64()?;
            assert!(g.iter().all(|v| v.is_finite()), "{dev:?}: d{name} = {g:?}");
        }
        // dKL/dmu = mu where the reconstruction saturates and passes no gradient back.
        assert!(mu.grad().unwrap().to_vec_f64()?.iter().any(|&g| g != 0.0));
    }
    Ok(())
}

#[test]
fn defaults_are_pytorchs() {
    let ce = CrossEntropyLoss::default();
    assert!(ce.weight.is_none() && ce.ignore_index == -100 && ce.reduction == Reduction::Mean && ce.label_smoothing == 0.0);
    let nll = NLLLoss::new();
    assert!(nll.weight.is_none() && nll.ignore_index == -100 && nll.reduction == Reduction::Mean);
    assert_eq!(MSELoss::new().reduction, Reduction::Mean);
    assert_eq!(L1Loss::new().reduction, Reduction::Mean);
    let bce = BCELoss::new();
    assert!(bce.weight.is_none() && bce.reduction == Reduction::Mean);
    let bcel = BCEWithLogitsLoss::new();
    assert!(bcel.weight.is_none() && bcel.pos_weight.is_none() && bcel.reduction == Reduction::Mean);
    let kl = KLDivLoss::new();
    assert!(kl.reduction == KlReduction::Mean && !kl.log_target);
}

#[test]
fn weights_are_buffers_that_move_with_the_module() -> R {
    let cpu = Device::cpu();
    let w = Tensor::ones(&[3], DType::F32, &cpu)?;
    let names = |sd: Vec<(String, Tensor)>| sd.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    let ce = CrossEntropyLoss::new().with_weight(w.clone());
    assert_eq!(names(ce.state_dict()), ["weight"]);
    assert_eq!(ce.num_parameters(), 0);
    let mut bcel = BCEWithLogitsLoss::new().with_weight(w.clone()).with_pos_weight(w.clone());
    assert_eq!(names(bcel.state_dict()), ["weight", "pos_weight"]);
    assert!(names(MSELoss::new().state_dict()).is_empty());
    if let Some(g) = gpu() {
        bcel.to_device(&g)?;
        assert_eq!(bcel.pos_weight.as_ref().unwrap().device(), &g);
        let x = Tensor::zeros(&[2, 3], DType::F32, &g)?;
        let loss = bcel.forward(&x, &x)?.to_vec_f64()?[0];
        assert!((loss - std::f64::consts::LN_2).abs() < 1e-6);
        // A weight left on another device is an error, not a panic. (Not `w`: bcel shares it,
        // and its move took `w` along in place, as PyTorch's `module.to` moves a shared tensor.)
        let ce_gpu = CrossEntropyLoss::new().with_weight(Tensor::ones(&[3], DType::F32, &Device::cpu())?);
        assert!(ce_gpu.forward(&x, &Tensor::zeros(&[2], DType::I64, &g)?).is_err());
    }
    Ok(())
}

#[test]
fn bad_shapes_and_dtypes_are_errors() -> R {
    let dev = Device::cpu();
    let f = |s: &[usize]| Tensor::zeros(s, DType::F32, &dev).unwrap();
    let i = |s: &[usize]| Tensor::zeros(s, DType::I64, &dev).unwrap();
    let ce = CrossEntropyLoss::new();
    assert!(ce.forward(&f(&[4, 3]), &i(&[4])).is_ok());
    assert!(ce.forward(&f(&[3]), &i(&[])).is_ok());
    for (x, y) in
        [(f(&[4, 3]), i(&[5])), (f(&[4, 3]), f(&[4])), (f(&[4, 3]), f(&[4, 2])), (i(&[4, 3]), i(&[4])), (f(&[4]), i(&[4])), (f(&[4, 3, 2]), i(&[4, 3]))]
    {
        assert!(ce.forward(&x, &y).is_err(), "CE accepted {:?} {:?}", x.shape(), y.shape());
    }
    assert!(ce.clone().with_weight(f(&[4])).forward(&f(&[4, 3]), &i(&[4])).is_err());
    assert!(ce.clone().with_weight(f(&[4])).forward(&f(&[4, 3]), &f(&[4, 3])).is_err());
    assert!(ce.clone().with_label_smoothing(1.5).forward(&f(&[4, 3]), &i(&[4])).is_err());
    assert!(ce.clone().with_label_smoothing(-0.1).forward(&f(&[4, 3]), &f(&[4, 3])).is_err());
    assert!(NLLLoss::new().forward(&f(&[4, 3]), &f(&[4])).is_err());
    assert!(NLLLoss::new().with_weight(f(&[2])).forward(&f(&[4, 3]), &i(&[4])).is_err());
    assert!(MSELoss::new().forward(&f(&[4, 3]), &f(&[3, 4])).is_err());
    assert!(L1Loss::new().forward(&f(&[4, 3]), &f(&[4])).is_err());
    assert!(BCELoss::new().forward(&f(&[4, 3]), &f(&[4, 1])).is_err());
    assert!(BCELoss::new().forward(&i(&[4, 3]), &i(&[4, 3])).is_err());
    assert!(BCELoss::new().with_weight(f(&[3])).forward(&f(&[4, 3]), &f(&[4, 3])).is_ok());
    assert!(BCELoss::new().with_weight(f(&[2])).forward(&f(&[4, 3]), &f(&[4, 3])).is_err());
    assert!(BCELoss::new().with_weight(f(&[2, 4, 3])).forward(&f(&[4, 3]), &f(&[4, 3])).is_err());
    let bcel = BCEWithLogitsLoss::new();
    assert!(bcel.forward(&f(&[4, 3]), &f(&[4, 2])).is_err());
    assert!(bcel.clone().with_pos_weight(f(&[3])).forward(&f(&[4, 3]), &f(&[4, 3])).is_ok());
    assert!(bcel.clone().with_pos_weight(f(&[4])).forward(&f(&[4, 3]), &f(&[4, 3])).is_err());
    assert!(bcel.clone().with_pos_weight(f(&[3])).forward(&f(&[4, 3]), &f(&[3, 3])).is_err());
    assert!(bcel.clone().with_pos_weight(f(&[3])).forward(&i(&[4, 3]), &i(&[4, 3])).is_err());
    assert!(bcel.clone().with_weight(f(&[5, 3])).forward(&f(&[4, 3]), &f(&[4, 3])).is_err());
    assert!(KLDivLoss::new().forward(&f(&[4, 3]), &f(&[4, 2])).is_err());
    let e = ce.forward(&f(&[4, 3]), &i(&[5])).unwrap_err().to_string();
    assert!(e.contains("cross_entropy") && e.contains("[4, 3]") && e.contains("[5]"), "{e}");
    Ok(())
}

/// The stable form `max(x, 0) + log(1 + exp(-|x|))` of `bce_with_logits` and `softplus` has
/// kinks at 0 whose one-sided rules would give the gradient `-y` there; PyTorch's (and ours) is
/// `sigmoid(0) - y = 0.5 - y`, right for every logit of a zero-initialized head.
#[test]
fn functional_bce_with_logits_gradient_at_zero() -> R {
    let dev = Device::cpu();
    let x = Tensor::zeros(&[2], DType::F32, &dev)?.requires_grad_(true)?;
    let y = Tensor::from_vec(vec![0.0f32, 1.0], &[2], &dev)?;
    x.bce_with_logits(&y, Reduction::Sum)?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0.5, -0.5]);
    let z = Tensor::zeros(&[1], DType::F32, &dev)?.requires_grad_(true)?;
    z.softplus()?.sum_all()?.backward()?;
    assert_eq!(z.grad().unwrap().to_vec::<f32>()?, [0.5]);
    Ok(())
}

/// A class target outside `0..C` names the loss, the target and the number of classes (it
/// used to surface as the gather inside the loss: "index 12 is out of range for an axis of
/// size 10"). On the CPU, where the index check runs as the loss runs.
#[test]
fn a_class_target_out_of_range_names_the_loss_and_the_target() -> R {
    let d = Device::cpu();
    let x = Tensor::randn(&[2, 10], 3, DType::F32, &d)?;
    let logp = x.log_softmax(1usize)?;
    for bad in [12i64, -1] {
        let y = Tensor::from_vec(vec![1i64, bad], &[2], &d)?;
        let w = Tensor::ones(&[10], DType::F32, &d)?;
        let cases: Vec<(&str, liandan_nn::error::Result<Tensor>)> = vec![
            ("cross_entropy", x.cross_entropy(&y, Reduction::Mean).map_err(Into::into)),
            ("nll_loss", logp.nll_loss(&y, Reduction::Mean).map_err(Into::into)),
            ("cross_entropy", CrossEntropyLoss::new().forward(&x, &y)),
            ("cross_entropy", CrossEntropyLoss::new().with_weight(w.clone()).forward(&x, &y)),
            ("nll_loss", NLLLoss::new().forward(&logp, &y)),
        ];
        for (op, r) in cases {
            let e = r.expect_err("an out-of-range target must be an error").to_string();
            assert!(e.starts_with(op) && e.contains(&format!("target {bad} ")) && e.contains("10 classes"), "{e}");
        }
    }
    let e = liandan_nn::zoo::build("mlp", &d)?.loss(&Tensor::zeros(&[1, 1024], DType::F32, &d)?, None).unwrap_err().to_string();
    assert!(!e.contains("shape") && e.contains("mlp") && e.contains("class labels"), "{e}");
    Ok(())
}

/// The same on the GPU, where the index check runs in the kernel and the error arrives at the
/// next read-back: it names the loss and the target too, not the gather inside the loss. A
/// gather the user calls directly is still reported as the gather.
#[test]
fn a_class_target_out_of_range_names_the_loss_on_the_gpu() -> R {
    let Some(d) = gpu() else { return Ok(()) };
    let x = Tensor::randn(&[2, 10], 3, DType::F32, &d)?;
    let logp = x.log_softmax(1usize)?;
    let w = Tensor::ones(&[10], DType::F32, &d)?;
    for bad in [12i64, -1] {
        let y = Tensor::from_vec(vec![1i64, bad], &[2], &d)?;
        type Loss<'a> = Box<dyn Fn() -> liandan_nn::Result<Tensor> + 'a>;
        let cases: Vec<(&str, Loss)> = vec![
            ("cross_entropy", Box::new(|| Ok(x.cross_entropy(&y, Reduction::Mean)?))),
            ("nll_loss", Box::new(|| Ok(logp.nll_loss(&y, Reduction::Sum)?))),
            ("cross_entropy", Box::new(|| CrossEntropyLoss::new().forward(&x, &y))),
            ("cross_entropy", Box::new(|| CrossEntropyLoss::new().with_weight(w.clone()).forward(&x, &y))),
            ("nll_loss", Box::new(|| NLLLoss::new().forward(&logp, &y))),
        ];
        for (op, loss) in cases {
            // The kernel skips the bad target; the read-back that follows reports it.
            let e = loss().and_then(|l| Ok(l.to_vec_f64()?)).expect_err("an out-of-range target must be an error").to_string();
            assert!(e.starts_with(op) && e.contains(&format!("target {bad} ")) && e.contains("10 classes"), "{e}");
        }
        // The fault is cleared once reported.
        assert!(x.sum_all()?.to_vec_f64().is_ok());
        let e = x.gather(1usize, &y.unsqueeze(1usize)?)?.to_vec_f64().expect_err("a bad gather index must be an error").to_string();
        assert!(e.starts_with("gather") && e.contains(&bad.to_string()), "{e}");
    }
    Ok(())
}

/// Under autocast the VAE's noise is drawn in mu's type, so a training step casts only its
/// parameters (10: their gradients come back in f32 from the products and bias sums that
/// compute them), its input, and the two sums kept in f32 (BCE and the KL term, and their
/// gradients back: 2 + 2). An f32 draw cast six times more: mu and the noise's scale widened
/// for their sum, z narrowed for the decoder, and each back in backward.
#[test]
fn vae_under_autocast_casts_only_what_its_policy_asks() -> R {
    let dev = Device::cpu();
    let vae = liandan_nn::zoo::Vae::new(&dev)?;
    let x = Tensor::rand(&[4, 784], 0.0, 1.0, 5, DType::F32, &dev)?;
    for low in [DType::F16, DType::BF16] {
        // Counted on this thread alone: the other tests run beside it.
        let casts = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = casts.clone();
        let step = liandan_tensor::observe::observe_ops(
            move |op| seen.set(seen.get() + usize::from(op.op == "to_dtype")),
            || -> liandan_nn::Result<()> {
                let loss = liandan_nn::autocast(low, || -> liandan_nn::Result<Tensor> {
                    let out = vae.forward_full(&x)?;
                    assert_eq!(out.mu.dtype(), low);
                    liandan_nn::zoo::Vae::loss_of(&out, &x)
                })?;
                Ok(loss.backward()?)
            },
        );
        step?;
        assert_eq!(casts.get(), 15, "casts of a {low} step");
        for t in vae.parameters() {
            assert_eq!(t.grad().map(|g| g.dtype()), Some(DType::F32));
            t.set_grad(None);
        }
    }
    Ok(())
}
