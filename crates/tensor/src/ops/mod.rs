//! Tensor operations. Each checks its operands once, here, then calls a backend kernel and
//! records its backward rule; composites are built from these and need neither.

mod activation;
mod attention;
mod conv;
mod conv_fused;
mod elementwise;
mod index;
mod loss;
mod matmul;
mod norm;
mod pool;
mod recurrent;
mod reduce;
mod view;

pub(crate) use elementwise::drop_cached_scalars;
pub use loss::{CrossEntropyOptions, KlReduction, Reduction};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A dimension argument: `usize`, or a negative `isize`/`i32` counting from the end as PyTorch.
pub trait Dim: Copy {
    fn resolve(self, op: &'static str, rank: usize) -> Result<usize>;
}

impl Dim for usize {
    fn resolve(self, op: &'static str, rank: usize) -> Result<usize> {
        if self < rank {
            Ok(self)
        } else {
            Err(Error::DimOutOfRange { op, dim: self as isize, rank })
        }
    }
}

impl Dim for isize {
    fn resolve(self, op: &'static str, rank: usize) -> Result<usize> {
        let d = if self < 0 { self + rank as isize } else { self };
        if d >= 0 && (d as usize) < rank {
            Ok(d as usize)
        } else {
            Err(Error::DimOutOfRange { op, dim: self, rank })
        }
    }
}

impl Dim for i32 {
    fn resolve(self, op: &'static str, rank: usize) -> Result<usize> {
        (self as isize).resolve(op, rank)
    }
}

pub(crate) fn check_same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::DeviceMismatch { op, lhs: a.device().to_string(), rhs: b.device().to_string() });
    }
    Ok(())
}

pub(crate) fn check_same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch { op, lhs: a.dtype(), rhs: b.dtype() });
    }
    Ok(())
}

pub(crate) fn check_float(op: &'static str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::dtype(op, t.dtype(), "a floating-point tensor is required"));
    }
    Ok(())
}

pub(crate) fn check_index(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype() != crate::DType::I64 {
        return Err(Error::dtype(op, t.dtype(), "indices must be i64"));
    }
    Ok(())
}
