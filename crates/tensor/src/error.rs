//! The one error type of `liandan-tensor`.
//!
//! Policy: every fallible operation returns [`Result`]. Shape, dtype and device checks happen
//! once, in this crate, before a kernel is dispatched, and their messages name the op and the
//! offending shapes. Panics are reserved for broken internal invariants (a backend handing back
//! storage of the wrong type), never for anything a caller or a file can cause.

use crate::dtype::DType;

/// Errors raised by tensor operations and by backends.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two shapes that must agree do not; `detail` says how.
    #[error("{op}: lhs {lhs:?} and rhs {rhs:?} {detail}")]
    ShapeMismatch { op: &'static str, lhs: Vec<usize>, rhs: Vec<usize>, detail: String },

    /// A shape is invalid for the op on its own (wrong rank, empty, out-of-range dim, ...).
    #[error("{op}: shape {shape:?}: {detail}")]
    BadShape { op: &'static str, shape: Vec<usize>, detail: String },

    /// A dtype the op does not accept.
    #[error("{op}: dtype {got:?} is not supported here ({detail})")]
    BadDType { op: &'static str, got: DType, detail: String },

    /// Two operands of different dtypes.
    #[error("{op}: dtypes disagree, lhs {lhs:?} and rhs {rhs:?}; cast one with `to_dtype`")]
    DTypeMismatch { op: &'static str, lhs: DType, rhs: DType },

    /// Two operands on different devices.
    #[error("{op}: operands live on different devices, {lhs} and {rhs}; move one with `to_device`")]
    DeviceMismatch { op: &'static str, lhs: String, rhs: String },

    /// A dimension index out of range for the tensor's rank.
    #[error("{op}: dim {dim} is out of range for a tensor of rank {rank}")]
    DimOutOfRange { op: &'static str, dim: isize, rank: usize },

    /// An index value (from a gather, a label, ...) outside the indexed axis.
    #[error("{op}: index {index} is out of range for an axis of size {size}")]
    IndexOutOfRange { op: &'static str, index: i64, size: usize },

    /// A class target of a loss outside `0..classes` (and not its `ignore_index`).
    #[error("{op}: target {target} is not a class: the input has {classes} classes, 0 to {last}", last = *classes as i64 - 1)]
    ClassOutOfRange { op: &'static str, target: i64, classes: usize },

    /// The host buffer does not hold as many elements as the shape needs.
    #[error("{op}: {got} elements given for shape {shape:?}, which holds {want}")]
    ElementCount { op: &'static str, got: usize, want: usize, shape: Vec<usize> },

    /// Memory for a tensor cannot be had: more than an address space holds, or more than the
    /// device (or the host) has free. `bytes` is what was asked for.
    #[error("{op}: cannot allocate {bytes} bytes: {detail}")]
    OutOfMemory { op: &'static str, bytes: u128, detail: String },

    /// Autograd was asked for something it cannot do.
    #[error("backward: {0}")]
    Autograd(String),

    /// A device could not be found or created.
    #[error("device: {0}")]
    Device(String),

    /// A backend failed while running a kernel (out of memory, device lost, ...).
    #[error("{backend}: {op}: {detail}")]
    Backend { backend: String, op: &'static str, detail: String },

    /// The profiler was misused (stopped before it started) or could not write its trace.
    #[error("profile: {0}")]
    Profile(String),

    /// A setting (an environment variable, see [`crate::settings`]) holds a value it does not
    /// accept.
    #[error(transparent)]
    Setting(#[from] crate::settings::SettingError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn shape(op: &'static str, lhs: &[usize], rhs: &[usize], detail: impl Into<String>) -> Self {
        Error::ShapeMismatch { op, lhs: lhs.to_vec(), rhs: rhs.to_vec(), detail: detail.into() }
    }

    pub(crate) fn bad_shape(op: &'static str, shape: &[usize], detail: impl Into<String>) -> Self {
        Error::BadShape { op, shape: shape.to_vec(), detail: detail.into() }
    }

    pub(crate) fn dtype(op: &'static str, got: DType, detail: impl Into<String>) -> Self {
        Error::BadDType { op, got, detail: detail.into() }
    }
}
