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
element!(f16, F16, |x| x.to_f64(), |v| f16::from_f64(v));
element!(bf16, BF16, |x| x.to_f64(), |v| bf16::from_f64(v));
element!(i64, I64, |x| x as f64, |v| v as i64);
element!(u8, U8, |x| x as f64, |v| v as u8);

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

/// Converts host bytes of dtype `dtype` to `f64` values. Used by tests and by `to_vec_f64`.
pub fn bytes_to_f64(bytes: &[u8], dtype: DType) -> Vec<f64> {
    fn conv<T: Element>(bytes: &[u8]) -> Vec<f64> {
        bytemuck::pod_collect_to_vec::<u8, T>(bytes).into_iter().map(T::to_f64).collect()
    }
    match dtype {
        DType::F32 => conv::<f32>(bytes),
        DType::F64 => conv::<f64>(bytes),
        DType::F16 => conv::<f16>(bytes),
        DType::BF16 => conv::<bf16>(bytes),
        DType::I64 => conv::<i64>(bytes),
        DType::U8 => conv::<u8>(bytes),
        DType::Bool => conv::<Bool8>(bytes),
    }
}

/// Converts `f64` values to host bytes of dtype `dtype` (rounding as `as` casts do).
pub fn f64_to_bytes(values: &[f64], dtype: DType) -> Vec<u8> {
    fn conv<T: Element>(values: &[f64]) -> Vec<u8> {
        let v: Vec<T> = values.iter().map(|&x| T::from_f64(x)).collect();
        bytemuck::cast_slice(&v).to_vec()
    }
    match dtype {
        DType::F32 => conv::<f32>(values),
        DType::F64 => conv::<f64>(values),
        DType::F16 => conv::<f16>(values),
        DType::BF16 => conv::<bf16>(values),
        DType::I64 => conv::<i64>(values),
        DType::U8 => conv::<u8>(values),
        DType::Bool => conv::<Bool8>(values),
    }
}
