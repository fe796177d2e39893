//! Tensor operations. Each checks its operands once, here, then calls a backend kernel and
//! records its backward rule; composites are built from these and need neither.
//!
//! The custom ops this crate defines (the types exported here: [`LstmCell`], [`Relu`],
//! [`BatchNormTrain`], ...) are its fused kernels' interface: each has its composite here, and
//! a backend that runs one as a kernel knows it by type (see [`crate::custom`]).

mod activation;
mod attention;
mod batch_norm;
mod bce;
mod cast_all;
mod conv;
mod conv_fused;
mod create;
mod custom;
mod elementwise;
mod gru;
mod index;
mod loss;
mod lstm_sequence;
mod matmul;
mod norm;
mod pool;
mod recurrent;
mod reduce;
mod softmax;
mod view;

pub use activation::{AddRelu, Gelu, GeluBackward, Relu, ReluBackward};
pub use attention::{Attention, AttentionBackward, AttentionBackwardJoined};
pub use batch_norm::{BatchNormBackward, BatchNormTrain};
pub use bce::{BceLoss, BceLossBackward};
pub use cast_all::CastAll;
pub use conv_fused::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBackwardWeightWide, Conv2dBias, Conv2dBiasRelu};
pub use elementwise::AddWide;
pub use gru::{GruCell, GruCellBackward};
pub use loss::{CrossEntropyOptions, KlReduction, NllLoss, NllLossBackward, Reduction};
pub use lstm_sequence::{LstmSequence, LstmSequenceBackward};
pub use matmul::{GeluMlp, LinearGelu, LinearGrads, MatmulBias, MatmulGeluBackward, MatmulWide};
pub use norm::{AddLayerNorm, LayerNorm, LayerNormBackward, LayerNormBackwardInto, LayerNormLow};
pub use pool::MaxPool2dBackward;
pub use recurrent::{LstmCell, LstmCellBackward, LstmStep};
pub use reduce::{SumChannels, SumRowsWide};
pub use softmax::{LogSoftmaxLastDim, LogSoftmaxLastDimBackward, SoftmaxLastDim, SoftmaxLastDimBackward};

use crate::autograd::GradFn;
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

impl Tensor {
    /// Size of one dimension (negative counts from the end).
    pub fn dim(&self, dim: impl Dim) -> Result<usize> {
        let d = dim.resolve("dim", self.rank())?;
        Ok(self.shape()[d])
    }

    /// This tensor (computed outside the graph) recorded as the result of `inputs` through
    /// `grad_fn`: how an op records its own rule over a kernel's or a composite's result.
    pub(crate) fn recorded(&self, inputs: &[&Tensor], grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        Tensor::view_op(self.storage(), self.layout().clone(), self.dtype(), self.device(), inputs, grad_fn)
    }
}
