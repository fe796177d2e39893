//! Initializers, as `torch.nn.init`'s: each returns a new F32 tensor of the given shape on a
//! device, a leaf that does not require grad (call `.requires_grad_(true)` to make it a
//! parameter). Random ones draw their seed from [`liandan_tensor::rng::next_seed`], so
//! [`liandan_tensor::manual_seed`] makes them reproducible; the same seed gives the same
//! uniform (and truncated normal) values on every device.
//!
//! Shapes follow PyTorch's weight layouts: `[out_features, in_features]` for Linear,
//! `[C_out, C_in, kH, kW]` for Conv, so that [`calculate_fan_in_and_fan_out`] reads fans as
//! PyTorch does.
//!
//! ```
//! use liandan_nn::init::{self, FanMode, Nonlinearity};
//! use liandan_nn::Device;
//! # fn main() -> liandan_nn::Result<()> {
//! let dev = Device::cpu();
//! liandan_nn::manual_seed(0);
//! // Kaiming-He for a ReLU network, as `kaiming_normal_(w, mode="fan_out", nonlinearity="relu")`.
//! let w = init::kaiming_normal(&[64, 3, 3, 3], 0.0, FanMode::FanOut, Nonlinearity::ReLU, &dev)?.requires_grad_(true)?;
//! assert_eq!(init::calculate_fan_in_and_fan_out(w.shape())?, (27, 576));
//! let b = init::zeros(&[64], &dev)?;
//! # let _ = b;
//! # Ok(())
//! # }
//! ```

use liandan_tensor::rng::{draw, next_seed};
use liandan_tensor::{DType, Device, Distribution, Tensor};

use crate::error::Result;

/// The nonlinearity a layer feeds, for [`calculate_gain`] (`torch.nn.init.calculate_gain`'s
/// names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nonlinearity {
    Linear,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Sigmoid,
    Tanh,
    ReLU,
    /// Takes the negative slope as the `param` of [`calculate_gain`] (default 0.01).
    LeakyReLU,
    SELU,
}

/// Which fan [`kaiming_uniform`] and [`kaiming_normal`] keep the variance of: `FanIn` the
/// forward pass's (PyTorch's default), `FanOut` the backward pass's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FanMode {
    #[default]
    FanIn,
    FanOut,
}

fn bad(op: &'static str, shape: &[usize], detail: impl Into<String>) -> crate::error::Error {
    liandan_tensor::Error::BadShape { op, shape: shape.to_vec(), detail: detail.into() }.into()
}

/// `(fan_in, fan_out)` of a weight of `shape`: `shape[1]` and `shape[0]` times the receptive
/// field (the product of the dims after the first two). Shapes of rank below 2 have no fans.
pub fn calculate_fan_in_and_fan_out(shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() < 2 {
        return Err(bad("calculate_fan_in_and_fan_out", shape, "fan in and fan out can not be computed for a tensor with fewer than 2 dimensions"));
    }
    let receptive: usize = shape[2..].iter().product();
    Ok((shape[1] * receptive, shape[0] * receptive))
}

/// The recommended gain for `nonlinearity`: 1 for linear, conv and sigmoid, 5/3 for tanh, √2
/// for ReLU, `√(2 / (1 + slope²))` for leaky ReLU (`param` is the slope, default 0.01) and 3/4
/// for SELU. `param` matters for leaky ReLU only.
pub fn calculate_gain(nonlinearity: Nonlinearity, param: Option<f64>) -> f64 {
    use Nonlinearity::*;
    match nonlinearity {
        Linear | Conv1d | Conv2d | Conv3d | ConvTranspose1d | ConvTranspose2d | ConvTranspose3d | Sigmoid => 1.0,
        Tanh => 5.0 / 3.0,
        ReLU => 2f64.sqrt(),
        LeakyReLU => {
            let slope = param.unwrap_or(0.01);
            (2.0 / (1.0 + slope * slope)).sqrt()
        }
        // PyTorch's choice: 3/4 keeps the input's variance in self-normalizing networks.
        SELU => 0.75,
    }
}

fn check_finite(op: &'static str, shape: &[usize], args: &[(&str, f64)]) -> Result<()> {
    match args.iter().find(|(_, v)| !v.is_finite()) {
        Some((name, v)) => Err(bad(op, shape, format!("{name} must be finite, got {v}"))),
        None => Ok(()),
    }
}

/// Uniform on `[a, b)` (`torch.nn.init.uniform_`).
pub fn uniform(shape: &[usize], a: f64, b: f64, device: &Device) -> Result<Tensor> {
    check_finite("uniform", shape, &[("a", a), ("b", b)])?;
    if a > b {
        return Err(bad("uniform", shape, format!("the range [a, b) is empty: a = {a} > b = {b}")));
    }
    Ok(Tensor::rand(shape, a, b, next_seed(), DType::F32, device)?)
}

/// Normal with mean `mean` and standard deviation `std >= 0` (`torch.nn.init.normal_`).
pub fn normal(shape: &[usize], mean: f64, std: f64, device: &Device) -> Result<Tensor> {
    check_finite("normal", shape, &[("mean", mean), ("std", std)])?;
    if std < 0.0 {
        return Err(bad("normal", shape, format!("std must be >= 0, got {std}")));
    }
    Ok(Tensor::random(shape, Distribution::Normal { mean, std }, next_seed(), DType::F32, device)?)
}

/// Every element `val` (`torch.nn.init.constant_`).
pub fn constant(shape: &[usize], val: f64, device: &Device) -> Result<Tensor> {
    Ok(Tensor::full(shape, val, DType::F32, device)?)
}

/// Zeros (`torch.nn.init.zeros_`).
pub fn zeros(shape: &[usize], device: &Device) -> Result<Tensor> {
    constant(shape, 0.0, device)
}

/// Ones (`torch.nn.init.ones_`).
pub fn ones(shape: &[usize], device: &Device) -> Result<Tensor> {
    constant(shape, 1.0, device)
}

/// Glorot: uniform on `±gain √(6 / (fan_in + fan_out))` (`torch.nn.init.xavier_uniform_`).
pub fn xavier_uniform(shape: &[usize], gain: f64, device: &Device) -> Result<Tensor> {
    let bound = 3f64.sqrt() * xavier_std(shape, gain)?;
    uniform(shape, -bound, bound, device)
}

/// Glorot: normal with std `gain √(2 / (fan_in + fan_out))` (`torch.nn.init.xavier_normal_`).
pub fn xavier_normal(shape: &[usize], gain: f64, device: &Device) -> Result<Tensor> {
    normal(shape, 0.0, xavier_std(shape, gain)?, device)
}

fn xavier_std(shape: &[usize], gain: f64) -> Result<f64> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(shape)?;
    // An empty tensor has nothing to fill; std 0 keeps the division finite.
    Ok(if fan_in + fan_out == 0 { 0.0 } else { gain * (2.0 / (fan_in + fan_out) as f64).sqrt() })
}

/// He: uniform on `±gain √(3 / fan)` with `gain = calculate_gain(nonlinearity, Some(a))`
/// (`torch.nn.init.kaiming_uniform_`; `a` is the leaky ReLU's negative slope, PyTorch's
/// default 0, and `mode` picks the fan).
pub fn kaiming_uniform(shape: &[usize], a: f64, mode: FanMode, nonlinearity: Nonlinearity, device: &Device) -> Result<Tensor> {
    let bound = 3f64.sqrt() * kaiming_std(shape, a, mode, nonlinearity)?;
    uniform(shape, -bound, bound, device)
}

/// He: normal with std `gain / √fan` (`torch.nn.init.kaiming_normal_`); arguments as
/// [`kaiming_uniform`].
pub fn kaiming_normal(shape: &[usize], a: f64, mode: FanMode, nonlinearity: Nonlinearity, device: &Device) -> Result<Tensor> {
    normal(shape, 0.0, kaiming_std(shape, a, mode, nonlinearity)?, device)
}

fn kaiming_std(shape: &[usize], a: f64, mode: FanMode, nonlinearity: Nonlinearity) -> Result<f64> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(shape)?;
    let fan = if mode == FanMode::FanIn { fan_in } else { fan_out };
    // PyTorch skips empty tensors (with a warning) rather than divide by a zero fan.
    Ok(if fan == 0 { 0.0 } else { calculate_gain(nonlinearity, Some(a)) / (fan as f64).sqrt() })
}

/// The normal distribution `N(mean, std²)` truncated to `[a, b]`
/// (`torch.nn.init.trunc_normal_`, whose defaults are `mean = 0`, `std = 1`, `a = -2`, `b = 2`).
///
/// Sampled by inverting the CDF, as PyTorch does, but in f64 on the host: there is no `erfinv`
/// op, and f64 keeps the tails right where PyTorch's f32 `erfinv` clamps far-out intervals to
/// their ends. Each element takes 48 random bits, two draws of the counter-based generator, so
/// the values are the same on every device.
pub fn trunc_normal(shape: &[usize], mean: f64, std: f64, a: f64, b: f64, device: &Device) -> Result<Tensor> {
    const OP: &str = "trunc_normal";
    check_finite(OP, shape, &[("mean", mean), ("std", std), ("a", a), ("b", b)])?;
    if std <= 0.0 || a >= b {
        return Err(bad(OP, shape, format!("needs std > 0 and a < b, got std = {std}, [a, b] = [{a}, {b}]")));
    }
    let numel: usize = shape.iter().product();
    if numel > (u32::MAX / 2) as usize {
        return Err(bad(OP, shape, "more than 2^31 elements in one random tensor"));
    }
    // Sample the standardized interval in its lower tail, where the CDF keeps its relative
    // precision, and mirror back: N(0, 1) is symmetric.
    let (lo, hi) = ((a - mean) / std, (b - mean) / std);
    let flip = lo + hi > 0.0;
    let (lo, hi) = if flip { (-hi, -lo) } else { (lo, hi) };
    let (p_lo, p_hi) = (norm_cdf(lo), norm_cdf(hi));
    let seed = next_seed();
    let values: Vec<f32> = (0..numel as u32)
        .map(|i| {
            let bits = ((draw(seed, 2 * i) >> 8) as u64) << 24 | (draw(seed, 2 * i + 1) >> 8) as u64;
            let u = (bits as f64 + 0.5) / (1u64 << 48) as f64;
            let z = if p_hi > 1e-300 { norm_ppf(p_lo + u * (p_hi - p_lo)) } else { far_tail(lo, hi, u) }.clamp(lo, hi);
            (mean + std * if flip { -z } else { z }).clamp(a, b) as f32
        })
        .collect();
    Ok(Tensor::from_vec(values, shape, device)?)
}

/// The quantile `u` of N(0, 1) truncated to `[lo, hi]` when `hi < -37`, where the CDF
/// underflows. There the density `exp(-x² / 2)` is within a factor `1 + O(1 / hi²)` of the
/// exponential `exp(hi (hi - x))` on `x <= hi`, whose truncated quantile is closed-form.
fn far_tail(lo: f64, hi: f64, u: f64) -> f64 {
    let rate = -hi;
    hi + (u * (-(hi - lo) * rate).exp_m1()).ln_1p() / rate
}

/// The standard normal CDF, `erfc(-x / √2) / 2`, with a relative error below 1.2e-7 for every
/// `x <= 0` (Numerical Recipes' Chebyshev fit of `erfc`), which is where it is used.
fn norm_cdf(x: f64) -> f64 {
    let z = (x / 2f64.sqrt()).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277];
    let erfc = t * (-z * z + poly.iter().rev().fold(0.0, |acc, c| c + t * acc)).exp();
    if x <= 0.0 {
        0.5 * erfc
    } else {
        1.0 - 0.5 * erfc
    }
}

/// The standard normal quantile for `p` in `(0, 1)`, to about 1e-16 relative (Wichura's
/// AS 241, `PPND16`).
// The coefficients are Wichura's (AS241), kept digit for digit as published.
#[allow(clippy::excessive_precision)]
fn norm_ppf(p: f64) -> f64 {
    fn ratio(x: f64, num: &[f64; 8], den: &[f64; 8]) -> f64 {
        let horner = |c: &[f64; 8]| c.iter().rev().fold(0.0, |acc, k| acc * x + k);
        horner(num) / horner(den)
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        let num = [
            3.387132872796366608,
            133.14166789178437745,
            1971.5909503065514427,
            13731.693765509461125,
            45921.953931549871457,
            67265.770927008700853,
            33430.575583588128105,
            2509.0809287301226727,
        ];
        let den = [
            1.0,
            42.313330701600911252,
            687.1870074920579083,
            5394.1960214247511077,
            21213.794301586595867,
            39307.89580009271061,
            28729.085735721942674,
            5226.4952788528545610,
        ];
        return q * ratio(r, &num, &den);
    }
    let r = (-(if q < 0.0 { p } else { 1.0 - p }).ln()).sqrt();
    let z = if r <= 5.0 {
        let num = [
            1.42343711074968357734,
            4.6303378461565452959,
            5.7694972214606914055,
            3.64784832476320460504,
            1.27045825245236838258,
            0.24178072517745061177,
            0.0227238449892691845833,
            7.7454501427834140764e-4,
        ];
        let den = [
            1.0,
            2.05319162663775882187,
            1.6763848301838038494,
            0.68976733498510000455,
            0.14810397642748007459,
            0.0151986665636164571966,
            5.475938084995344946e-4,
            1.05075007164441684324e-9,
        ];
        ratio(r - 1.6, &num, &den)
    } else {
        let num = [
            6.6579046435011037772,
            5.4637849111641143699,
            1.7848265399172913358,
            0.29656057182850489123,
            0.026532189526576123093,
            0.0012426609473880784386,
            2.71155556874348757815e-5,
            2.01033439929228813265e-7,
        ];
        let den = [
            1.0,
            0.59983220655588793769,
            0.13692988092273580531,
            0.0148753612908506148525,
            7.868691311456132591e-4,
            1.8463183175100546818e-5,
            1.4215117583164458887e-7,
            2.04426310338993978564e-15,
        ];
        ratio(r - 5.0, &num, &den)
    };
    if q < 0.0 {
        -z
    } else {
        z
    }
}
