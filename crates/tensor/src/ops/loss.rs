//! Losses built from primitives, in their numerically stable forms.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::check_same_device;
use crate::tensor::Tensor;

/// How a loss combines per-element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    None,
    #[default]
    Mean,
    Sum,
}

impl Reduction {
    pub(crate) fn apply(self, t: Tensor) -> Result<Tensor> {
        match self {
            Reduction::None => Ok(t),
            Reduction::Mean => t.mean_all(),
            Reduction::Sum => t.sum_all(),
        }
    }
}

pub(crate) fn check_same_shape(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::shape(op, a.shape(), b.shape(), "input and target must have the same shape"));
    }
    check_same_device(op, a, b)
}

impl Tensor {
    /// Negative log-likelihood of `[N, C]` log-probabilities at the i64 class `targets` `[N]`.
    pub fn nll_loss(&self, targets: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.nll_loss(targets, reduction);
        }
        if self.rank() != 2 || targets.rank() != 1 || targets.shape()[0] != self.shape()[0] {
            return Err(Error::shape("nll_loss", self.shape(), targets.shape(), "must be [N, C] log-probabilities and [N] class indices"));
        }
        if targets.dtype() != DType::I64 {
            return Err(Error::dtype("nll_loss", targets.dtype(), "targets must be i64 class indices"));
        }
        let picked = self.gather(1usize, &targets.unsqueeze(1usize)?)?.squeeze(1usize)?;
        reduction.apply(picked.neg()?)
    }

    /// Cross-entropy of `[N, C]` logits against i64 class `targets` `[N]`.
    pub fn cross_entropy(&self, targets: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.cross_entropy(targets, reduction);
        }
        if self.rank() != 2 {
            return Err(Error::shape("cross_entropy", self.shape(), targets.shape(), "must be [N, C] logits and [N] class indices"));
        }
        self.log_softmax(1usize)?.nll_loss(targets, reduction)
    }

    /// Mean squared error.
    pub fn mse_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x, t]) = crate::autocast::widened([self, target])? {
            return x.mse_loss(&t, reduction);
        }
        check_same_shape("mse_loss", self, target)?;
        reduction.apply(self.sub(target)?.square()?)
    }

    /// Binary cross-entropy on logits, `max(x, 0) - x y + log(1 + exp(-|x|))`: finite for any x.
    pub fn bce_with_logits(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x, t]) = crate::autocast::widened([self, target])? {
            return x.bce_with_logits(&t, reduction);
        }
        check_same_shape("bce_with_logits", self, target)?;
        // softplus(x) - x y: stable for any logit, and its gradient sigmoid(x) - y also at 0.
        reduction.apply(self.softplus()?.sub(&self.mul(target)?)?)
    }
}
