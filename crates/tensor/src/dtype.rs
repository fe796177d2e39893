//! Element types: the runtime [`DType`] tag and the host-side [`Element`] trait.

use half::{bf16, f16};

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    /// Labels and indices, as in PyTorch.
    I64,
    U8,
    /// Stored as one byte per element, 0 or 1.
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// True for the floating-point dtypes, the only ones that carry gradients.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// The name PyTorch and safetensors use.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// Every dtype, for tests and exhaustive tables.
    pub const ALL: [DType; 7] = [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::U8, DType::Bool];
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Rust type that can be copied in and out of a tensor of dtype [`Element::DTYPE`].
pub trait Element: bytemuck::Pod + Copy + Send + Sync + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

macro_rules! element {
    ($t:ty, $d:ident, |$x:ident| $to:expr, |$v:ident| $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline]
            fn to_f64(self) -> f64 {
                let $x = self;
                $to
            }
            #[inline]
            fn from_f64($v: f64) -> Self {
                $from
            }
        }
    };
}

element!(f32, F32, |x| x as f64, |v| v as f32);
element!(f64, F64, |x| x, |v| v);
element!(f16, F16, |x| x.to_f64(), |v| f16_from_f64(v));
element!(bf16, BF16, |x| x.to_f64(), |v| bf16_from_f64(v));
element!(i64, I64, |x| x as f64, |v| v as i64);
element!(u8, U8, |x| x as f64, |v| v as u8);

/// `v` rounded to f32 to odd: toward zero, with the last bit set when anything was dropped.
/// Rounded on to nearest at a precision at least two bits narrower (f16, bf16), this gives
/// the correctly rounded result, which rounding to nearest twice does not (a value just past a
/// tie at the narrow precision can become the tie).
pub fn f32_rounded_to_odd(v: f64) -> f32 {
    let f = v as f32;
    if v.is_nan() || f as f64 == v {
        return f;
    }
    // One step back toward zero where rounding to nearest went up in magnitude.
    let bits = f.to_bits() - ((f as f64).abs() > v.abs()) as u32;
    f32::from_bits(bits | 1)
}

/// `v` rounded to the nearest f16 (ties to even). `half::f16::from_f64` drops the low 32 bits
/// of `v` before rounding, which can turn a value just past a tie into the tie.
pub fn f16_from_f64(v: f64) -> f16 {
    f16::from_f32(f32_rounded_to_odd(v))
}

/// `v` rounded to the nearest bf16 (ties to even); see [`f16_from_f64`].
pub fn bf16_from_f64(v: f64) -> bf16 {
    bf16::from_f32(f32_rounded_to_odd(v))
}

/// A boolean element, one byte, 0 or 1. (`bool` itself is not `Pod`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct Bool8(pub u8);

impl Element for Bool8 {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        (self.0 != 0) as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        Bool8((v != 0.0) as u8)
    }
}

/// `$f::<T>($arg)` with `T` the [`Element`] type of `dtype`.
macro_rules! by_element {
    ($dtype:expr, $f:ident($arg:expr)) => {
        match $dtype {
            DType::F32 => $f::<f32>($arg),
            DType::F64 => $f::<f64>($arg),
            DType::F16 => $f::<f16>($arg),
            DType::BF16 => $f::<bf16>($arg),
            DType::I64 => $f::<i64>($arg),
            DType::U8 => $f::<u8>($arg),
            DType::Bool => $f::<Bool8>($arg),
        }
    };
}

/// Converts host bytes of dtype `dtype` to `f64` values. Used by tests and by `to_vec_f64`.
pub fn bytes_to_f64(bytes: &[u8], dtype: DType) -> Vec<f64> {
    fn conv<T: Element>(bytes: &[u8]) -> Vec<f64> {
        bytemuck::pod_collect_to_vec::<u8, T>(bytes).into_iter().map(T::to_f64).collect()
    }
    by_element!(dtype, conv(bytes))
}

/// Converts `f64` values to host bytes of dtype `dtype` (rounding as `as` casts do).
pub fn f64_to_bytes(values: &[f64], dtype: DType) -> Vec<u8> {
    fn conv<T: Element>(values: &[f64]) -> Vec<u8> {
        let v: Vec<T> = values.iter().map(|&x| T::from_f64(x)).collect();
        bytemuck::cast_slice(&v).to_vec()
    }
    by_element!(dtype, conv(values))
}

#[cfg(test)]
mod rounding_tests {
    use super::{bf16_from_f64, f16_from_f64, f32_rounded_to_odd};
    use half::{bf16, f16};

    #[test]
    fn values_just_past_a_tie_round_away_from_it() {
        // 1 + 2^-8 is a bf16 tie; 2^-23 more must round up (half's own from_f64 rounds down).
        let x = (1.0f32 + 1.0 / 256.0 + 1e-7) as f64;
        assert_eq!(bf16_from_f64(x), bf16::from_f32(x as f32));
        assert_eq!(bf16_from_f64(x).to_f32(), 1.0078125);
        // 1 + 2^-11 is an f16 tie; 2^-23 more must round up.
        let y = 1.0 + 2f64.powi(-11) + 2f64.powi(-23);
        assert_eq!(f16_from_f64(y), f16::from_f32(y as f32));
        // A true f64 just past a tie (by 2^-40): the f32 step alone would make it the tie.
        let z = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(bf16_from_f64(z).to_f32(), 1.0078125);
        assert_eq!(bf16_from_f64(1.0 + 2f64.powi(-8)).to_f32(), 1.0, "an exact tie goes to even");
    }

    #[test]
    fn specials_and_extremes_survive() {
        assert!(bf16_from_f64(f64::NAN).is_nan() && f16_from_f64(f64::NAN).is_nan());
        assert_eq!(bf16_from_f64(f64::INFINITY), bf16::INFINITY);
        assert_eq!(bf16_from_f64(-1e300), bf16::NEG_INFINITY);
        assert_eq!(f16_from_f64(1e6), f16::INFINITY);
        assert_eq!(bf16_from_f64(-0.0).to_bits(), 0x8000);
        assert_eq!(f32_rounded_to_odd(1e-300).to_bits(), 1);
        assert_eq!(f32_rounded_to_odd(-1e-300).to_bits(), 0x8000_0001);
        assert_eq!(f32_rounded_to_odd(1e300), f32::MAX);
        assert_eq!(f16_from_f64(65504.0), f16::MAX);
    }
}
