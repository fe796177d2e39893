//! The CPU buffer, one typed `Vec` per dtype, and the scalar traits kernels are generic over.

use half::{bf16, f16};
use std::sync::atomic::{AtomicU64, Ordering};

use liandan_tensor::{BackendStorage, DType, Error, MemoryStats, Result, Storage};
use num_traits::Float;

/// A CPU buffer. `Bool` holds one byte per element, 0 or 1, like [`liandan_tensor::Bool8`].
#[derive(Clone, Debug, PartialEq)]
pub enum CpuStorage {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    Bool(Vec<u8>),
}

/// Binds `$v` to the `Vec` inside whichever variant `$s` is and evaluates `$body`, which must
/// type-check for every element type.
macro_rules! each_dtype {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            $crate::storage::CpuStorage::F32($v) => $body,
            $crate::storage::CpuStorage::F16($v) => $body,
            $crate::storage::CpuStorage::BF16($v) => $body,
            $crate::storage::CpuStorage::F64($v) => $body,
            $crate::storage::CpuStorage::I64($v) => $body,
            $crate::storage::CpuStorage::U8($v) => $body,
            $crate::storage::CpuStorage::Bool($v) => $body,
        }
    };
}

/// Like [`each_dtype`], but `$body` yields a `Vec` of the same element type, rewrapped in the
/// same variant.
macro_rules! map_dtype {
    ($s:expr, $v:ident => $body:expr) => {{
        use $crate::storage::CpuStorage as S;
        match $s {
            S::F32($v) => S::F32($body),
            S::F16($v) => S::F16($body),
            S::BF16($v) => S::BF16($body),
            S::F64($v) => S::F64($body),
            S::I64($v) => S::I64($body),
            S::U8($v) => S::U8($body),
            S::Bool($v) => S::Bool($body),
        }
    }};
}

/// [`map_dtype`] for the float variants only; other dtypes are a `BadDType` error for `$op`.
macro_rules! map_float {
    ($s:expr, $op:expr, $v:ident => $body:expr) => {{
        use $crate::storage::CpuStorage as S;
        match $s {
            S::F32($v) => S::F32($body),
            S::F16($v) => S::F16($body),
            S::BF16($v) => S::BF16($body),
            S::F64($v) => S::F64($body),
            other => return Err($crate::storage::bad_dtype($op, other.dtype(), "floating-point dtypes only")),
        }
    }};
}

pub(crate) use {each_dtype, map_dtype, map_float};

impl CpuStorage {
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each_dtype!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as native-endian bytes.
    pub fn as_bytes(&self) -> &[u8] {
        each_dtype!(self, v => bytemuck::cast_slice(v))
    }

    /// Copies native-endian bytes into a new buffer of `dtype`.
    pub fn from_bytes(bytes: &[u8], dtype: DType) -> Result<CpuStorage> {
        fn read<T: bytemuck::Pod>(bytes: &[u8], dtype: DType) -> Result<Vec<T>> {
            let size = std::mem::size_of::<T>();
            if !bytes.len().is_multiple_of(size) {
                return Err(backend_error("from_host", format!("{} bytes is not a whole number of {dtype} elements", bytes.len())));
            }
            // Copying through a typed Vec, not `cast_slice`, since host bytes need not be aligned.
            let mut v = alloc("from_host", bytes.len() / size, T::zeroed())?;
            bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
            Ok(v)
        }
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(read(bytes, dtype)?),
            DType::F16 => CpuStorage::F16(read(bytes, dtype)?),
            DType::BF16 => CpuStorage::BF16(read(bytes, dtype)?),
            DType::F64 => CpuStorage::F64(read(bytes, dtype)?),
            DType::I64 => CpuStorage::I64(read(bytes, dtype)?),
            DType::U8 => CpuStorage::U8(read(bytes, dtype)?),
            DType::Bool => CpuStorage::Bool(read::<u8>(bytes, dtype)?.into_iter().map(|b| (b != 0) as u8).collect()),
        })
    }

    /// The shared handle kernels return; its bytes count as in use until the last handle drops.
    pub fn into_storage(self) -> Storage {
        std::sync::Arc::new(Accounted::new(self))
    }
}

impl BackendStorage for CpuStorage {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn size_in_bytes(&self) -> usize {
        self.as_bytes().len()
    }
}

/// Bytes held by live CPU storages, the most they have been, how many were made, and the
/// budget allocations must fit in (`u64::MAX`: none). Process-wide, as the CPU device is one.
static IN_USE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
static MADE: AtomicU64 = AtomicU64::new(0);
static BUDGET: AtomicU64 = AtomicU64::new(u64::MAX);

/// A [`CpuStorage`] whose bytes are counted in [`memory_stats`] while it lives. Kernels see
/// the `CpuStorage` inside (through `as_any`).
#[derive(Debug)]
struct Accounted(CpuStorage);

impl Accounted {
    fn new(s: CpuStorage) -> Accounted {
        let now = IN_USE.fetch_add(s.size_in_bytes() as u64, Ordering::Relaxed) + s.size_in_bytes() as u64;
        PEAK.fetch_max(now, Ordering::Relaxed);
        MADE.fetch_add(1, Ordering::Relaxed);
        Accounted(s)
    }
}

impl Drop for Accounted {
    fn drop(&mut self) {
        IN_USE.fetch_sub(self.0.size_in_bytes() as u64, Ordering::Relaxed);
    }
}

impl BackendStorage for Accounted {
    fn as_any(&self) -> &dyn std::any::Any {
        &self.0
    }

    fn size_in_bytes(&self) -> usize {
        self.0.size_in_bytes()
    }
}

/// What the CPU's storages hold now (nothing is pooled: freed buffers go back to the system).
pub(crate) fn memory_stats() -> MemoryStats {
    MemoryStats { in_use: IN_USE.load(Ordering::Relaxed), pooled: 0, peak: PEAK.load(Ordering::Relaxed), allocations: MADE.load(Ordering::Relaxed), staging: 0 }
}

pub(crate) fn set_budget(bytes: Option<u64>) {
    BUDGET.store(bytes.unwrap_or(u64::MAX), Ordering::Relaxed);
}

pub(crate) fn reset_peak() {
    PEAK.store(IN_USE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The CPU buffer behind a storage handed to this backend.
///
/// # Panics
/// If the storage belongs to another backend: `liandan-tensor` checks devices before dispatch,
/// so this is a broken invariant, not a user error.
pub(crate) fn cpu(s: &dyn BackendStorage) -> &CpuStorage {
    s.as_any().downcast_ref::<CpuStorage>().unwrap_or_else(|| panic!("cpu backend was handed a foreign storage: {s:?}"))
}

/// A buffer of `n` copies of `value`, or an error naming the bytes when the host cannot give
/// them. Every result buffer is allocated here so that an absurd size is an error a caller can
/// act on (a batch-size finder depends on it), not a capacity panic or the allocator's abort.
pub(crate) fn alloc<T: Clone>(op: &'static str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = reserve(op, n)?;
    v.resize(n, value);
    Ok(v)
}

/// An empty buffer with room for `n` elements, or the error of [`alloc`].
pub(crate) fn reserve<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let bytes = n as u128 * std::mem::size_of::<T>() as u128;
    let (budget, in_use) = (BUDGET.load(Ordering::Relaxed), IN_USE.load(Ordering::Relaxed));
    if budget != u64::MAX && in_use as u128 + bytes > budget as u128 {
        return Err(Error::OutOfMemory {
            op,
            bytes,
            detail: format!("the CPU's memory budget of {budget} bytes has {} left (Device::set_memory_budget)", budget.saturating_sub(in_use)),
        });
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| Error::OutOfMemory {
        op,
        bytes: n as u128 * std::mem::size_of::<T>() as u128,
        detail: format!("the host has no such memory ({e}); use a smaller batch or shape"),
    })?;
    Ok(v)
}

pub(crate) fn bad_dtype(op: &'static str, got: DType, detail: impl Into<String>) -> Error {
    Error::BadDType { op, got, detail: detail.into() }
}

pub(crate) fn backend_error(op: &'static str, detail: impl Into<String>) -> Error {
    Error::Backend { backend: "cpu".into(), op, detail: detail.into() }
}

pub(crate) fn dtype_mismatch(op: &'static str, lhs: &CpuStorage, rhs: &CpuStorage) -> Error {
    Error::DTypeMismatch { op, lhs: lhs.dtype(), rhs: rhs.dtype() }
}

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
                self.to_f64() as i64
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
scalar_float!(f16, f16::to_f64, f16::from_f64, |v: i64| f16::from_f64(v as f64));
scalar_float!(bf16, bf16::to_f64, bf16::from_f64, |v: i64| bf16::from_f64(v as f64));

impl Scalar for i64 {
    const FLOAT: bool = false;
    fn add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn to_i64(self) -> i64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    fn from_i64(v: i64) -> Self {
        v
    }
}

impl Scalar for u8 {
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
        v as i64 as u8
    }
    fn from_i64(v: i64) -> Self {
        v as u8
    }
}

/// A float element type. `Acc` is the type sums of it are taken in: f16 and bf16 widen to f32.
pub(crate) trait Real: Scalar + Float {
    type Acc: Real<Acc = Self::Acc> + std::ops::AddAssign;
    fn widen(self) -> Self::Acc;
    fn narrow(a: Self::Acc) -> Self;
    fn erf(self) -> Self;
    /// Round half to even, as `torch.round`.
    fn round_even(self) -> Self;
}

impl Real for f32 {
    type Acc = f32;
    fn widen(self) -> f32 {
        self
    }
    fn narrow(a: f32) -> f32 {
        a
    }
    fn erf(self) -> f32 {
        libm::erff(self)
    }
    fn round_even(self) -> f32 {
        self.round_ties_even()
    }
}

impl Real for f64 {
    type Acc = f64;
    fn widen(self) -> f64 {
        self
    }
    fn narrow(a: f64) -> f64 {
        a
    }
    fn erf(self) -> f64 {
        libm::erf(self)
    }
    fn round_even(self) -> f64 {
        self.round_ties_even()
    }
}

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
