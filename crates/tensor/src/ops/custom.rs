//! [`Tensor::custom`]: running a custom op ([`crate::custom`]) and recording its backward.

use std::sync::Arc;

use crate::autograd::{self, GradFn};
use crate::custom::CustomOp;
use crate::error::{Error, Result};
use crate::fused;
use crate::tensor::Tensor;

impl Tensor {
    /// Runs the custom op `op` on `inputs`: as one kernel where their device has one (and
    /// fusion is on), else as its composite. Output 0 records `op`'s backward
    /// ([`CustomOp::backward`]) when an input requires grad; the later outputs are returned
    /// beside it, outside the graph. The inputs must be as the op's kernels take them (the
    /// tensor crate's own ops take contiguous inputs), on one device.
    pub fn custom<T: CustomOp>(op: T, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let outs = match fused::run(&op, inputs) {
            Some(outs) => outs?,
            None if op.composite_has_grad() => return op.composite(inputs),
            None => autograd::no_grad(|| op.composite(inputs))?,
        };
        let mut outs = outs.into_iter();
        let first = outs.next().ok_or_else(|| Error::Autograd(format!("{}: a custom op must have an output", op.name())))?;
        let aux: Vec<Tensor> = outs.collect();
        let kept = aux.clone();
        let y = first.recorded(inputs, move || GradFn::Custom { op: Arc::new(op), aux: kept });
        Ok(std::iter::once(y).chain(aux).collect())
    }
}
