//! The element types kernels are generic over: [`Scalar`] for every buffer element, [`Real`]
//! for the floats, with the conversions and accumulation types they share.

use std::any::TypeId;

use half::{bf16, f16};
use liandan_tensor::dtype::{bf16_from_f64, f16_from_f64};
use num_traits::Float;

/// An element type of a [`CpuStorage`] variant (`u8` serves both `U8` and `Bool`).
pub(crate) trait Scalar: Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// Whether conversions from this type go through `f64` (floats) or `i64` (integers).
    const FLOAT: bool;
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    /// Truncates toward zero for integers; out of range, i64 saturates and u8 wraps modulo 256
    /// (PyTorch on x86 wraps u8 too).
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
    fn is_nan(self) -> bool {
        false
    }
    /// Addition that wraps for integers; halves round once, through f32.
    fn add(self, other: Self) -> Self;
}

macro_rules! scalar_float {
    ($t:ty, $to_f64:expr, $from_f64:expr, $from_i64:expr) => {
        impl Scalar for $t {
            const FLOAT: bool = true;
            fn to_f64(self) -> f64 {
                $to_f64(self)
            }
            fn to_i64(self) -> i64 {
                Scalar::to_f64(self) as i64
            }
            fn from_f64(v: f64) -> Self {
                $from_f64(v)
            }
            fn from_i64(v: i64) -> Self {
                $from_i64(v)
            }
            fn is_nan(self) -> bool {
                Float::is_nan(self)
            }
            fn add(self, other: Self) -> Self {
                self + other
            }
        }
    };
}

scalar_float!(f32, |x: f32| x as f64, |v: f64| v as f32, |v: i64| v as f32);
scalar_float!(f64, |x: f64| x, |v: f64| v, |v: i64| v as f64);
scalar_float!(f16, f16::to_f64, f16_from_f64, |v: i64| f16_from_f64(v as f64));
scalar_float!(bf16, bf16::to_f64, bf16_from_f64, |v: i64| bf16_from_f64(v as f64));

/// The integers: addition wraps, and `from_f64` truncates to i64 (saturating) before the
/// narrower cast (which wraps).
macro_rules! scalar_int {
    ($t:ty) => {
        impl Scalar for $t {
            const FLOAT: bool = false;
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                v as i64 as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}

scalar_int!(i64);
scalar_int!(u8);

/// A float element type. `Acc` is the type sums of it are taken in: f16 and bf16 widen to f32.
pub(crate) trait Real: Scalar + Float {
    type Acc: Real<Acc = Self::Acc> + std::ops::AddAssign;
    fn widen(self) -> Self::Acc;
    fn narrow(a: Self::Acc) -> Self;
    /// `xs` as accumulator elements without a copy, where the type is its own accumulator
    /// (f32, f64); `None` for the halves, which widen.
    fn as_acc(xs: &[Self]) -> Option<&[Self::Acc]> {
        let _ = xs;
        None
    }
    /// [`Real::as_acc`] for a slice to write.
    fn as_acc_mut(xs: &mut [Self]) -> Option<&mut [Self::Acc]> {
        let _ = xs;
        None
    }
    fn erf(self) -> Self;
    /// Round half to even, as `torch.round`.
    fn round_even(self) -> Self;
    /// The fused GELU, `y = x Phi(x)`, over matching slices: vectorized in f32
    /// ([`crate::vmath`]), element by element on `libm` otherwise.
    fn gelu_slice(x: &[Self], y: &mut [Self]) {
        y.iter_mut().zip(x).for_each(|(y, &x)| *y = x * normal(x).0);
    }
    /// The fused GELU's gradient, `dx = dy (Phi(x) + x phi(x))`, over matching slices.
    fn gelu_backward_slice(x: &[Self], dy: &[Self], dx: &mut [Self]) {
        dx.iter_mut().zip(x.iter().zip(dy)).for_each(|(dx, (&x, &dy))| {
            let (cdf, pdf) = normal(x);
            *dx = dy * (cdf + x * pdf);
        });
    }
    /// `y = ln x` over matching slices (the `log` primitive on dense data): within 2 ulp of
    /// libm and vectorized in f32 ([`crate::vmath`]), libm element by element otherwise.
    fn ln_slice(x: &[Self], y: &mut [Self]) {
        y.iter_mut().zip(x).for_each(|(y, &x)| *y = x.ln());
    }
    /// `e = exp(e - shift)` in place (a softmax row's exponentials).
    fn exp_shifted_slice(e: &mut [Self], shift: Self) {
        e.iter_mut().for_each(|e| *e = (*e - shift).exp());
    }
    /// The fused LSTM cell on one row: gates `[4, H]` (i, f, g, o) and c `[H]` to h' and c'.
    fn lstm_cell_row(gates: &[Self], c: &[Self], h_out: &mut [Self], c_out: &mut [Self]) {
        let h = c.len();
        for j in 0..h {
            let a = |k: usize| gates[k * h + j];
            let c_new = sigmoid(a(1)) * c[j] + sigmoid(a(0)) * a(2).tanh();
            h_out[j] = sigmoid(a(3)) * c_new.tanh();
            c_out[j] = c_new;
        }
    }
    /// The fused LSTM cell's gradient on one row: gates `[4, H]`, c, c' and the gradients of
    /// h' and c' to dgates `[4, H]` and dc.
    fn lstm_cell_backward_row(gates: &[Self], c: &[Self], c_new: &[Self], dh: &[Self], dc_new: &[Self], dgates: &mut [Self], dc: &mut [Self]) {
        let (h, one) = (c.len(), Self::one());
        for j in 0..h {
            let a = |k: usize| gates[k * h + j];
            let (i, f, g, o) = (sigmoid(a(0)), sigmoid(a(1)), a(2).tanh(), sigmoid(a(3)));
            let tanh_c = c_new[j].tanh();
            // c' reaches the loss directly and through h' = o * tanh(c').
            let dc_total = dc_new[j] + dh[j] * o * (one - tanh_c * tanh_c);
            dgates[j] = dc_total * g * i * (one - i);
            dgates[h + j] = dc_total * c[j] * f * (one - f);
            dgates[2 * h + j] = dc_total * i * (one - g * g);
            dgates[3 * h + j] = dh[j] * tanh_c * o * (one - o);
            dc[j] = dc_total * f;
        }
    }
    /// The fused GRU cell on one row: `x_gates` and `h_gates` `[3, H]` (r, z, n) and h to h'.
    fn gru_cell_row(gx: &[Self], gh: &[Self], h: &[Self], h_out: &mut [Self]) {
        let n_ = h.len();
        for j in 0..n_ {
            let r = sigmoid(gx[j] + gh[j]);
            let z = sigmoid(gx[n_ + j] + gh[n_ + j]);
            let n = (gx[2 * n_ + j] + r * gh[2 * n_ + j]).tanh();
            h_out[j] = n + z * (h[j] - n);
        }
    }
    /// The fused GRU cell's gradient on one row: `x_gates`, `h_gates`, h and dh' to the
    /// gradients of `x_gates` and `h_gates` (`[3, H]` each) and of h.
    fn gru_cell_backward_row(gx: &[Self], gh: &[Self], h: &[Self], dh_new: &[Self], dgx: &mut [Self], dgh: &mut [Self], dh: &mut [Self]) {
        let (n_, one) = (h.len(), Self::one());
        for j in 0..n_ {
            let r = sigmoid(gx[j] + gh[j]);
            let z = sigmoid(gx[n_ + j] + gh[n_ + j]);
            let n = (gx[2 * n_ + j] + r * gh[2 * n_ + j]).tanh();
            let dn_pre = dh_new[j] * (one - z) * (one - n * n);
            let dr_pre = dn_pre * gh[2 * n_ + j] * r * (one - r);
            let dz_pre = dh_new[j] * (h[j] - n) * z * (one - z);
            dgx[j] = dr_pre;
            dgx[n_ + j] = dz_pre;
            dgx[2 * n_ + j] = dn_pre;
            dgh[j] = dr_pre;
            dgh[n_ + j] = dz_pre;
            dgh[2 * n_ + j] = dn_pre * r;
            dh[j] = dh_new[j] * z;
        }
    }
}

fn sigmoid<A: Float>(x: A) -> A {
    A::one() / (A::one() + (-x).exp())
}

/// `Phi(x)`, the standard normal CDF, and `phi(x)`, its density.
fn normal<A: Real>(x: A) -> (A, A) {
    let half = A::from(0.5).expect("0.5 is a float");
    let cdf = half * (A::one() + Real::erf(x * A::from(std::f64::consts::FRAC_1_SQRT_2).expect("a float")));
    let pdf = (-half * x * x).exp() * A::from(0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2).expect("a float");
    (cdf, pdf)
}

/// f32 and f64 accumulate in themselves; `$more` are the type's own methods (f32's vectorized
/// slices from `vmath`).
macro_rules! real_native {
    ($t:ty, $erf:path, $($more:tt)*) => {
        impl Real for $t {
            type Acc = $t;
            fn widen(self) -> $t {
                self
            }
            fn narrow(a: $t) -> $t {
                a
            }
            fn as_acc(xs: &[$t]) -> Option<&[$t]> {
                Some(xs)
            }
            fn as_acc_mut(xs: &mut [$t]) -> Option<&mut [$t]> {
                Some(xs)
            }
            fn erf(self) -> $t {
                $erf(self)
            }
            fn round_even(self) -> $t {
                self.round_ties_even()
            }
            $($more)*
        }
    };
}

real_native! {
    f32,
    libm::erff,
    fn gelu_slice(x: &[f32], y: &mut [f32]) {
        crate::vmath::gelu_forward(x, y)
    }
    fn gelu_backward_slice(x: &[f32], dy: &[f32], dx: &mut [f32]) {
        crate::vmath::gelu_backward(x, dy, dx)
    }
    fn ln_slice(x: &[f32], y: &mut [f32]) {
        crate::vmath::ln_slice(x, y)
    }
    fn exp_shifted_slice(e: &mut [f32], shift: f32) {
        crate::vmath::exp_shifted(e, shift)
    }
    fn lstm_cell_row(gates: &[f32], c: &[f32], h_out: &mut [f32], c_out: &mut [f32]) {
        crate::vmath::lstm_cell_row(gates, c, h_out, c_out)
    }
    fn lstm_cell_backward_row(gates: &[f32], c: &[f32], c_new: &[f32], dh: &[f32], dc_new: &[f32], dgates: &mut [f32], dc: &mut [f32]) {
        crate::vmath::lstm_cell_backward_row(gates, c, c_new, dh, dc_new, dgates, dc)
    }
}
real_native!(f64, libm::erf,);

macro_rules! real_half {
    ($t:ty) => {
        impl Real for $t {
            type Acc = f32;
            fn widen(self) -> f32 {
                self.to_f32()
            }
            fn narrow(a: f32) -> Self {
                <$t>::from_f32(a)
            }
            fn erf(self) -> Self {
                <$t>::from_f32(libm::erff(self.to_f32()))
            }
            fn round_even(self) -> Self {
                // Exact: every rounded value of a half is itself representable as a half.
                <$t>::from_f32(self.to_f32().round_ties_even())
            }
        }
    };
}

real_half!(f16);
real_half!(bf16);

/// `v` as f32s when `T` is f32, for the kernels with f32 code of their own (`vmath`).
pub(crate) fn as_f32<T: 'static>(v: &[T]) -> Option<&[f32]> {
    // SAFETY: `T` is f32, so the slice is one of f32s.
    (TypeId::of::<T>() == TypeId::of::<f32>()).then(|| unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len()) })
}

/// [`as_f32`] for a slice written through.
pub(crate) fn as_f32_mut<T: 'static>(v: &mut [T]) -> Option<&mut [f32]> {
    // SAFETY: `T` is f32, so the slice is one of f32s, borrowed mutably as `v` was.
    (TypeId::of::<T>() == TypeId::of::<f32>()).then(|| unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len()) })
}
