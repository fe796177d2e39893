//! The CPU buffer, one typed `ndarray` array per dtype, and the scalar traits kernels are
//! generic over.
//!
//! A buffer is a flat [`Array1`] in standard layout; the tensor's [`liandan_tensor::Layout`]
//! says how it is viewed (`crate::ndarray` builds the matching n-dimensional view). Kernels
//! work on the array's slice, [`slice`], where a flat loop is what they need.

use half::{bf16, f16};
use liandan_tensor::{BackendStorage, DType, Error, MemoryStats, Result, Storage};
use ndarray::Array1;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::pool;

pub(crate) use crate::scalar::{Real, Scalar};

/// A CPU buffer. `Bool` holds one byte per element, 0 or 1, like [`liandan_tensor::Bool8`].
///
/// The variants cannot be built outside this crate (`non_exhaustive`): every buffer is made
/// from a `Vec` here or through [`CpuElement::wrap`], so it is one contiguous run and
/// [`slice`] always has a slice to give.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuStorage {
    #[non_exhaustive]
    F32(Array1<f32>),
    #[non_exhaustive]
    F16(Array1<f16>),
    #[non_exhaustive]
    BF16(Array1<bf16>),
    #[non_exhaustive]
    F64(Array1<f64>),
    #[non_exhaustive]
    I64(Array1<i64>),
    #[non_exhaustive]
    U8(Array1<u8>),
    #[non_exhaustive]
    Bool(Array1<u8>),
}

/// An element type with its own [`CpuStorage`] variant: `f32`, `f64`, `f16`, `bf16`, `i64` and
/// `u8` (bool tensors are stored as bytes too, but convert them with a cast to `u8` first).
pub trait CpuElement: liandan_tensor::Element + sealed::Sealed {
    /// The buffer, when `s` holds this element type.
    fn array(s: &CpuStorage) -> Option<&Array1<Self>>;
    /// The buffer, moved out, when `s` holds this element type (`s` back otherwise).
    fn take(s: CpuStorage) -> std::result::Result<Array1<Self>, CpuStorage>;
    /// A buffer of these elements; a strided array (a slice of a larger one) is copied into
    /// one contiguous run, which every buffer is.
    fn wrap(a: Array1<Self>) -> CpuStorage;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! cpu_element {
    ($t:ty, $variant:ident) => {
        impl sealed::Sealed for $t {}
        impl CpuElement for $t {
            fn array(s: &CpuStorage) -> Option<&Array1<Self>> {
                match s {
                    CpuStorage::$variant(a) => Some(a),
                    _ => None,
                }
            }
            fn take(s: CpuStorage) -> std::result::Result<Array1<Self>, CpuStorage> {
                match s {
                    CpuStorage::$variant(a) => Ok(a),
                    other => Err(other),
                }
            }
            fn wrap(a: Array1<Self>) -> CpuStorage {
                CpuStorage::$variant(if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned() })
            }
        }
    };
}
cpu_element!(f32, F32);
cpu_element!(f64, F64);
cpu_element!(f16, F16);
cpu_element!(bf16, BF16);
cpu_element!(i64, I64);
cpu_element!(u8, U8);

/// The elements of a buffer as one slice.
///
/// # Panics
/// Never: every buffer is one contiguous run (see [`CpuStorage`]).
pub(crate) fn slice<T>(a: &Array1<T>) -> &[T] {
    a.as_slice().expect("a CPU buffer is built from a Vec, so it is contiguous")
}

/// Binds `$v` to the slice inside whichever variant `$s` is and evaluates `$body`, which must
/// type-check for every element type.
macro_rules! each_dtype {
    ($s:expr, $v:ident => $body:expr) => {{
        use $crate::storage::{slice, CpuStorage as S};
        $crate::storage::arms!($s, $v => $body, [F32 F16 BF16 F64 I64 U8 Bool])
    }};
}

/// Like [`each_dtype`], but `$body` yields a `Vec` of the same element type, rewrapped in the
/// same variant.
macro_rules! map_dtype {
    ($s:expr, $v:ident => $body:expr) => {{
        use $crate::storage::{slice, CpuStorage as S};
        $crate::storage::arms!(rewrap $s, $v => $body, [F32 F16 BF16 F64 I64 U8 Bool])
    }};
}

/// [`map_dtype`] for the float variants only; other dtypes are a `BadDType` error for `$op`.
macro_rules! map_float {
    ($s:expr, $op:expr, $v:ident => $body:expr) => {{
        use $crate::storage::{slice, CpuStorage as S};
        $crate::storage::arms!(rewrap $s, $v => $body, [F32 F16 BF16 F64],
            other => return Err($crate::storage::bad_dtype($op, other.dtype(), "floating-point dtypes only")))
    }};
}

/// The match arms of the macros above: one per listed variant, with `$v` bound to its slice;
/// `rewrap` puts the body's `Vec` back into the same variant, and a last arm may catch the rest.
macro_rules! arms {
    ($s:expr, $v:ident => $body:expr, [$($V:ident)*]) => {
        match $s { $(S::$V(a) => { let $v = slice(a); $body })* }
    };
    (rewrap $s:expr, $v:ident => $body:expr, [$($V:ident)*] $(, $other:ident => $fallback:expr)?) => {
        match $s { $(S::$V(a) => S::$V({ let $v = slice(a); $body }.into()),)* $($other => $fallback,)? }
    };
}

pub(crate) use {arms, each_dtype, map_dtype, map_float};

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
        fn read<T: bytemuck::Pod + Send>(bytes: &[u8], dtype: DType) -> Result<Vec<T>> {
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
            DType::F32 => CpuStorage::F32(read(bytes, dtype)?.into()),
            DType::F16 => CpuStorage::F16(read(bytes, dtype)?.into()),
            DType::BF16 => CpuStorage::BF16(read(bytes, dtype)?.into()),
            DType::F64 => CpuStorage::F64(read(bytes, dtype)?.into()),
            DType::I64 => CpuStorage::I64(read(bytes, dtype)?.into()),
            DType::U8 => CpuStorage::U8(read(bytes, dtype)?.into()),
            DType::Bool => CpuStorage::Bool({
                let mut v = read::<u8>(bytes, dtype)?;
                v.iter_mut().for_each(|b| *b = (*b != 0) as u8);
                v.into()
            }),
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

/// Bytes held by live CPU storages and kernels' working buffers, the most they have been, how
/// many buffers were taken from the system (not from the pool), and the budget allocations must
/// fit in (`u64::MAX`: none). Process-wide, as the CPU device is one.
static IN_USE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
/// The most ever in use, which [`reset_peak`] leaves alone: what bounds the pool.
static MOST: AtomicU64 = AtomicU64::new(0);
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
        MOST.fetch_max(now, Ordering::Relaxed);
        Accounted(s)
    }
}

impl Accounted {
    /// The buffer, which stops counting as in use (its new owner is not a tensor).
    fn into_inner(mut self) -> CpuStorage {
        IN_USE.fetch_sub(self.0.size_in_bytes() as u64, Ordering::Relaxed);
        std::mem::replace(&mut self.0, CpuStorage::U8(Array1::from(Vec::new())))
    }
}

/// The buffer moved out of a CPU storage that nothing else holds; the storage back otherwise.
///
/// # Panics
/// If the storage belongs to another backend (callers check with [`cpu`]'s downcast first).
pub(crate) fn try_unwrap(storage: Storage) -> std::result::Result<CpuStorage, Storage> {
    let any: std::sync::Arc<dyn std::any::Any + Send + Sync> = storage;
    let any = match any.downcast::<Accounted>() {
        Ok(owned) => return std::sync::Arc::try_unwrap(owned).map(Accounted::into_inner).map_err(|shared| shared as Storage),
        Err(any) => any,
    };
    let plain = any.downcast::<CpuStorage>().expect("the caller checked that this is a CPU storage");
    std::sync::Arc::try_unwrap(plain).map_err(|shared| shared as Storage)
}

impl Drop for Accounted {
    /// Stops counting the buffer and hands it to the pool (which keeps only large ones).
    fn drop(&mut self) {
        IN_USE.fetch_sub(self.0.size_in_bytes() as u64, Ordering::Relaxed);
        fn give<T: Send + 'static>(a: Array1<T>) {
            pool::give(a.into_raw_vec_and_offset().0);
        }
        match std::mem::replace(&mut self.0, CpuStorage::U8(Array1::from(Vec::new()))) {
            CpuStorage::F32(a) => give(a),
            CpuStorage::F16(a) => give(a),
            CpuStorage::BF16(a) => give(a),
            CpuStorage::F64(a) => give(a),
            CpuStorage::I64(a) => give(a),
            CpuStorage::U8(a) | CpuStorage::Bool(a) => give(a),
        }
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

/// What the CPU's storages hold now, and what the pool keeps.
pub(crate) fn memory_stats() -> MemoryStats {
    MemoryStats {
        in_use: IN_USE.load(Ordering::Relaxed),
        pooled: pool::pooled(),
        peak: PEAK.load(Ordering::Relaxed),
        allocations: MADE.load(Ordering::Relaxed),
        staging: 0,
    }
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
pub(crate) fn alloc<T: Clone + Send + 'static>(op: &'static str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = reserve(op, n)?;
    v.resize(n, value);
    Ok(v)
}

/// A buffer of `n` elements for a kernel that writes every one of them before it reads any:
/// a free one from the pool keeps its old values (a fill would only be overwritten), any other
/// is filled with `value`. Checks as [`alloc`].
pub(crate) fn alloc_overwritten<T: Copy + Send + 'static>(op: &'static str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = reserve_any(op, n)?;
    if v.len() != n {
        v.clear();
        v.resize(n, value);
    }
    Ok(v)
}

/// An empty buffer with room for exactly `n` elements (a free one from the pool when it has
/// one), or the error of [`alloc`].
pub(crate) fn reserve<T: Send + 'static>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let mut v = reserve_any(op, n)?;
    v.clear();
    Ok(v)
}

/// [`reserve`], the pool's buffer as it was given back (see [`alloc_overwritten`]).
fn reserve_any<T: Send + 'static>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let bytes = n as u128 * std::mem::size_of::<T>() as u128;
    let (budget, in_use) = (BUDGET.load(Ordering::Relaxed), IN_USE.load(Ordering::Relaxed));
    if budget != u64::MAX && in_use as u128 + bytes > budget as u128 {
        return Err(Error::OutOfMemory {
            op,
            bytes,
            detail: format!("the CPU's memory budget of {budget} bytes has {} left (Device::set_memory_budget)", budget.saturating_sub(in_use)),
        });
    }
    if let Some(v) = pool::take(n) {
        return Ok(v);
    }
    if bytes >= pool::MIN_BYTES as u128 {
        // A new large buffer: the pool frees what would take in-use and pooled bytes together
        // past twice the most ever in use (or past the budget), so what the process holds stays
        // bounded as shapes change. Buffers are reused by exact size, and a step's sizes each
        // peak at their own moment, so the most of each size summed runs above the most in use
        // at once: seed003_cnn's step still missed with a quarter's room, not with twice.
        let wanted = u64::try_from(bytes).unwrap_or(u64::MAX);
        let most = MOST.load(Ordering::Relaxed).max(in_use.saturating_add(wanted));
        pool::make_room(in_use, wanted, most.saturating_mul(2).min(budget));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| Error::OutOfMemory { op, bytes, detail: format!("the host has no such memory ({e}); use a smaller batch or shape") })?;
    MADE.fetch_add(1, Ordering::Relaxed);
    Ok(v)
}

/// Bytes of a kernel's working memory (not a tensor's) that count as in use, and toward the
/// peak, while this lives: the column blocks of a convolution, a column-major product block,
/// f32 copies of half-precision operands. (`allocations` counts the buffers [`reserve`] takes
/// from the system, these among them.)
#[must_use]
pub(crate) struct Held(u64);

impl Held {
    pub(crate) fn new(bytes: usize) -> Held {
        let bytes = bytes as u64;
        let now = IN_USE.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK.fetch_max(now, Ordering::Relaxed);
        MOST.fetch_max(now, Ordering::Relaxed);
        Held(bytes)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        IN_USE.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// The first `n` of `items` (there must be that many) in a buffer from [`alloc`]: what a kernel
/// would `collect`, but from the pool (a buffer made any other way does not come from it, though
/// it goes to it when its storage drops). For small or cheap maps: a hot loop is better written
/// where its closure's flags are known (a plain SGD step through here ran 2.5x slower, its
/// loop-invariant branches left inside).
pub(crate) fn collect_n<T: Clone + Default + Send + 'static>(op: &'static str, n: usize, items: impl IntoIterator<Item = T>) -> Result<Vec<T>> {
    let mut v = alloc(op, n, T::default())?;
    v.iter_mut().zip(items).for_each(|(o, x)| *o = x);
    Ok(v)
}

/// A working buffer of `n` elements ([`alloc`]'s checks, the budget's among them), counted
/// as [`Held`] while it lives and handed to the pool when it drops.
pub(crate) struct Scratch<T: Send + 'static> {
    v: Vec<T>,
    _held: Held,
}

/// A [`Scratch`] for a kernel that writes every element before it reads it
/// ([`alloc_overwritten`]).
pub(crate) fn scratch_overwritten<T: Copy + Send + 'static>(op: &'static str, n: usize, value: T) -> Result<Scratch<T>> {
    Ok(held(alloc_overwritten(op, n, value)?))
}

/// A buffer handed to the threads of one kernel, each writing its own elements of it.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the threads holding it write disjoint elements of a buffer that outlives them
// (each use says why its elements are its own).
unsafe impl<T: Send> Send for SharedMut<T> {}
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    pub(crate) fn new(buffer: &mut [T]) -> SharedMut<T> {
        SharedMut { ptr: buffer.as_mut_ptr(), len: buffer.len() }
    }

    /// The buffer's first element; a closure calling this takes the whole value, which
    /// crosses threads.
    pub(crate) fn get(self) -> *mut T {
        self.ptr
    }

    /// Elements `start..start + len`.
    ///
    /// # Safety
    /// No other thread reads or writes them while the slice lives, and the buffer outlives it.
    pub(crate) unsafe fn range<'a>(self, start: usize, len: usize) -> &'a mut [T] {
        assert!(start.checked_add(len).is_some_and(|end| end <= self.len), "elements {start}..+{len} of a buffer of {}", self.len);
        // SAFETY: in bounds (checked above); exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// `v` as a working buffer, counted while it lives.
fn held<T: Send + 'static>(v: Vec<T>) -> Scratch<T> {
    let held = Held::new(v.capacity() * std::mem::size_of::<T>());
    Scratch { v, _held: held }
}

impl<T: Send + 'static> Scratch<T> {
    /// The buffer, no longer counted here (it becomes a result, counted as its storage).
    pub(crate) fn into_vec(mut self) -> Vec<T> {
        std::mem::take(&mut self.v)
    }
}

impl<T: Send + 'static> Drop for Scratch<T> {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.v));
    }
}

impl<T: Send + 'static> std::ops::Deref for Scratch<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.v
    }
}

impl<T: Send + 'static> std::ops::DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.v
    }
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
