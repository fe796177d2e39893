//! `liandan_nn::init` against `torch.nn.init`: fans and gains equal PyTorch's (the literals were
//! printed by torch 2.15.0: `init._calculate_fan_in_and_fan_out(torch.empty(s))`,
//! `init.calculate_gain(name, param)`), bounds hold, sample moments of 100k-element tensors
//! match the distributions on every device, `manual_seed` reproduces, bad arguments are errors.

mod common;

use std::sync::Mutex;

use common::devices;
use liandan_nn::init::{self, FanMode, Nonlinearity};
use liandan_nn::{manual_seed, DType, Device, Tensor};

type R = liandan_nn::Result<()>;

/// `manual_seed` resets one global generator, and every draw advances it: tests that draw
/// hold this, since tests run on parallel threads.
static SEED: Mutex<()> = Mutex::new(());

/// Sample mean and standard deviation (dividing by n).
fn moments(t: &Tensor) -> (f64, f64) {
    let v = t.to_vec_f64().unwrap();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt())
}

/// Checks a tensor of `numel` draws: a fresh F32 leaf that does not require grad, with every
/// value in `[lo, hi]`, mean within 5 standard errors of `mean` and std within 2% of `std`.
fn check(what: &str, t: &Tensor, shape: &[usize], (lo, hi): (f64, f64), mean: f64, std: f64) {
    assert_eq!(t.shape(), shape, "{what}");
    assert_eq!(t.dtype(), DType::F32, "{what}");
    assert!(t.is_leaf() && !t.requires_grad(), "{what}: not a plain leaf");
    let v = t.to_vec_f64().unwrap();
    let (min, max) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(lo <= min && max <= hi, "{what}: values in [{min}, {max}], outside [{lo}, {hi}]");
    let (m, s) = moments(t);
    let se = std / (v.len() as f64).sqrt();
    assert!((m - mean).abs() <= 5.0 * se, "{what}: mean {m}, want {mean} ± {}", 5.0 * se);
    assert!((s / std - 1.0).abs() <= 0.02, "{what}: std {s}, want {std}");
}

#[test]
fn fans_are_pytorchs() -> R {
    for (shape, want) in
        [(&[3, 5][..], (5, 3)), (&[16, 8, 3, 3], (72, 144)), (&[4, 2, 5], (10, 20)), (&[2, 3, 4, 5, 6], (360, 240)), (&[7, 0], (0, 7)), (&[0, 4], (4, 0))]
    {
        assert_eq!(init::calculate_fan_in_and_fan_out(shape)?, want, "{shape:?}");
    }
    for shape in [&[][..], &[3]] {
        let e = init::calculate_fan_in_and_fan_out(shape).unwrap_err().to_string();
        assert!(e.contains("fewer than 2 dimensions"), "{e}");
        assert!(init::xavier_uniform(shape, 1.0, &Device::cpu()).is_err());
        assert!(init::kaiming_normal(shape, 0.0, FanMode::FanIn, Nonlinearity::ReLU, &Device::cpu()).is_err());
    }
    Ok(())
}

#[test]
fn gains_are_pytorchs() {
    use Nonlinearity::*;
    for (n, param, want) in [
        (Linear, None, 1.0),
        (Conv2d, None, 1.0),
        (ConvTranspose2d, None, 1.0),
        (Sigmoid, None, 1.0),
        (Tanh, None, 1.6666666666666667),
        (ReLU, None, std::f64::consts::SQRT_2),
        (LeakyReLU, None, 1.4141428569978354),
        (LeakyReLU, Some(0.2), 1.3867504905630728),
        (LeakyReLU, Some(5f64.sqrt()), 0.5773502691896257),
        (SELU, None, 0.75),
    ] {
        let got = init::calculate_gain(n, param);
        assert!((got - want).abs() <= 1e-15, "{n:?} {param:?}: {got}, want {want}");
    }
}

#[test]
fn distributions_have_their_bounds_and_moments() -> R {
    let _guard = SEED.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(0);
    let shape = [250, 400]; // fan_in 400, fan_out 250
    let conv = [400, 25, 2, 5]; // fan_in 250, fan_out 4000
    let n = 100_000;
    assert_eq!(conv.iter().product::<usize>(), n);
    let sqrt3 = 3f64.sqrt();
    for dev in devices() {
        let t = init::uniform(&shape, -0.5, 1.5, &dev)?;
        check("uniform", &t, &shape, (-0.5, 1.5), 0.5, 2.0 / 12f64.sqrt());
        let t = init::normal(&shape, 0.3, 2.0, &dev)?;
        check("normal", &t, &shape, (f64::NEG_INFINITY, f64::INFINITY), 0.3, 2.0);

        let gain = init::calculate_gain(Nonlinearity::Tanh, None);
        let std = gain * (2.0 / 650.0f64).sqrt();
        let bound = gain * (6.0 / 650.0f64).sqrt();
        let t = init::xavier_uniform(&shape, gain, &dev)?;
        check("xavier_uniform", &t, &shape, (-bound, bound), 0.0, std);
        let t = init::xavier_normal(&shape, gain, &dev)?;
        check("xavier_normal", &t, &shape, (f64::NEG_INFINITY, f64::INFINITY), 0.0, std);

        // PyTorch's Linear/Conv default: a = √5 gives the bound 1 / √fan_in.
        let t = init::kaiming_uniform(&conv, 5f64.sqrt(), FanMode::FanIn, Nonlinearity::LeakyReLU, &dev)?;
        let bound = 1.0 / 250f64.sqrt();
        check("kaiming_uniform", &t, &conv, (-bound, bound), 0.0, bound / sqrt3);
        let std = 2f64.sqrt() / 4000f64.sqrt();
        let t = init::kaiming_uniform(&conv, 0.0, FanMode::FanOut, Nonlinearity::ReLU, &dev)?;
        check("kaiming_uniform fan_out", &t, &conv, (-sqrt3 * std, sqrt3 * std), 0.0, std);
        let t = init::kaiming_normal(&conv, 0.0, FanMode::FanOut, Nonlinearity::ReLU, &dev)?;
        check("kaiming_normal", &t, &conv, (f64::NEG_INFINITY, f64::INFINITY), 0.0, std);

        // Truncated normals: the moments of N(mean, std²) on [a, b], from the closed form.
        for (mean, std, a, b, want_mean, want_std) in [
            (0.0, 1.0, -2.0, 2.0, 0.0, 0.8796256610342398),
            (1.0, 2.0, 0.0, 5.0, 1.8914875565450298, 1.227344835222499),
            (0.0, 1.0, 5.0, 6.0, 5.183147092691993, 0.1716170704621851),
            (0.0, 0.02, -0.04, 0.04, 0.0, 0.017592513220684794),
        ] {
            let t = init::trunc_normal(&shape, mean, std, a, b, &dev)?;
            check(&format!("trunc_normal({mean}, {std}, [{a}, {b}])"), &t, &shape, (a, b), want_mean, want_std);
        }
        // Beyond 37 standard deviations the CDF underflows: still inside [a, b], piled
        // against the end nearer the mean with a mean about 1/40 inside it.
        let t = init::trunc_normal(&[1000], 0.0, 1.0, -50.0, -40.0, &dev)?;
        let v = t.to_vec_f64()?;
        assert!(v.iter().all(|&x| (-50.0..=-40.0).contains(&x)), "{v:?}");
        let m = moments(&t).0;
        assert!((m + 40.025).abs() < 0.005, "far-tail mean {m}");

        for (what, t, value) in [
            ("constant", init::constant(&[3, 4], -2.5, &dev)?, -2.5),
            ("zeros", init::zeros(&[3, 4], &dev)?, 0.0),
            ("ones", init::ones(&[2, 2, 2], &dev)?, 1.0),
        ] {
            assert_eq!(t.dtype(), DType::F32);
            assert!(t.is_leaf() && !t.requires_grad(), "{what}");
            assert!(t.to_vec_f64()?.iter().all(|&x| x == value), "{what}");
        }
    }
    Ok(())
}

#[test]
fn manual_seed_reproduces_and_devices_agree() -> R {
    let _guard = SEED.lock().unwrap_or_else(|e| e.into_inner());
    let draw = |dev: &Device| -> liandan_nn::Result<Vec<Vec<f32>>> {
        manual_seed(1234);
        let ts = [
            init::uniform(&[64, 33], -1.0, 1.0, dev)?,
            init::normal(&[64, 33], 0.0, 1.0, dev)?,
            init::xavier_uniform(&[64, 33], 1.0, dev)?,
            init::kaiming_normal(&[64, 33], 0.0, FanMode::FanIn, Nonlinearity::ReLU, dev)?,
            init::trunc_normal(&[64, 33], 0.0, 1.0, -2.0, 2.0, dev)?,
        ];
        ts.iter().map(|t| Ok(t.to_vec::<f32>()?)).collect()
    };
    let cpu = Device::cpu();
    let first = draw(&cpu)?;
    assert_eq!(first, draw(&cpu)?);
    // Each call takes a fresh seed: the second uniform differs from the first.
    manual_seed(1234);
    let (a, b) = (init::uniform(&[100], 0.0, 1.0, &cpu)?, init::uniform(&[100], 0.0, 1.0, &cpu)?);
    assert_ne!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    for dev in devices().iter().skip(1) {
        let other = draw(dev)?;
        // Uniform draws scale the same 24-bit integers, and trunc_normal is computed on the
        // host: bit-identical. Normal draws pass through ln and cos, within a few ulps.
        for (i, what) in [(0, "uniform"), (2, "xavier_uniform"), (4, "trunc_normal")] {
            assert!(first[i] == other[i], "{dev:?}: {what} differs from the CPU's");
        }
        for (i, what) in [(1, "normal"), (3, "kaiming_normal")] {
            let scale = first[i].iter().fold(0f32, |m, a| m.max(a.abs()));
            let err = first[i].iter().zip(&other[i]).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / scale;
            eprintln!("{dev:?}: {what}: max difference from the CPU {err:.2e} of the largest value");
            assert!(err <= 1e-5, "{dev:?}: {what} differs by {err}");
        }
    }
    Ok(())
}

#[test]
fn empty_shapes_give_empty_tensors() -> R {
    let _guard = SEED.lock().unwrap_or_else(|e| e.into_inner());
    let dev = Device::cpu();
    // PyTorch skips tensors with a zero dim (with a warning) rather than divide by a zero fan.
    let t = init::kaiming_uniform(&[0, 4], 0.0, FanMode::FanOut, Nonlinearity::ReLU, &dev)?;
    assert_eq!(t.shape(), &[0, 4]);
    assert_eq!(init::xavier_normal(&[3, 0], 1.0, &dev)?.numel(), 0);
    assert_eq!(init::trunc_normal(&[0], 0.0, 1.0, -2.0, 2.0, &dev)?.numel(), 0);
    Ok(())
}

#[test]
fn bad_arguments_are_errors() {
    let dev = Device::cpu();
    let s = [4, 4];
    assert!(init::uniform(&s, 1.0, 0.0, &dev).is_err());
    assert!(init::uniform(&s, f64::NAN, 1.0, &dev).is_err());
    assert!(init::normal(&s, 0.0, -1.0, &dev).is_err());
    assert!(init::normal(&s, f64::INFINITY, 1.0, &dev).is_err());
    assert!(init::trunc_normal(&s, 0.0, 1.0, 2.0, 2.0, &dev).is_err());
    assert!(init::trunc_normal(&s, 0.0, 0.0, -2.0, 2.0, &dev).is_err());
    assert!(init::trunc_normal(&s, 0.0, 1.0, f64::NEG_INFINITY, 2.0, &dev).is_err());
    let e = init::uniform(&s, 1.0, 0.0, &dev).unwrap_err().to_string();
    assert!(e.contains("uniform") && e.contains("a = 1 > b = 0"), "{e}");
}
