//! Losses built from primitives, in their numerically stable forms, with PyTorch's
//! definitions: `nll_loss`, `cross_entropy` and their `_with` forms (class weights,
//! `ignore_index`, label smoothing), `mse_loss`, `l1_loss`, `bce_loss` on probabilities,
//! `bce_with_logits` and `kl_div`.
//!
//! Dimension letters: N batch, C classes; `*` any further dims.

use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused;
use crate::index_use::{with_index_use, IndexUse};
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

/// How a loss combines per-element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    None,
    #[default]
    Mean,
    Sum,
}

/// How [`Tensor::kl_div`] combines per-element values: PyTorch's `reduction`, including
/// `batchmean`, the sum divided by the batch size (the mathematically correct KL divergence;
/// `Mean` divides by every element, as PyTorch's `mean` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KlReduction {
    None,
    #[default]
    Mean,
    Sum,
    BatchMean,
}

impl From<Reduction> for KlReduction {
    fn from(r: Reduction) -> Self {
        match r {
            Reduction::None => KlReduction::None,
            Reduction::Mean => KlReduction::Mean,
            Reduction::Sum => KlReduction::Sum,
        }
    }
}

/// Options of [`Tensor::cross_entropy_with`], as `torch.nn.functional.cross_entropy`'s
/// keyword arguments. `Default` is PyTorch's defaults, except that no target is ignored
/// unless `ignore_index` is set (PyTorch's default `-100` is never a valid class anyway).
#[derive(Clone, Copy, Debug, Default)]
pub struct CrossEntropyOptions<'a> {
    /// Per-class weights `[C]`, of the logits' dtype.
    pub weight: Option<&'a Tensor>,
    /// Targets equal to this contribute nothing, to the loss or to the mean's divisor.
    pub ignore_index: Option<i64>,
    /// `ε` in `[0, 1]`: the target distribution is `(1 - ε) one_hot + ε / C`.
    pub label_smoothing: f64,
}

/// Runs a loss's lookup of its class targets so that a target out of range names the loss and
/// the target rather than the gather, whether the backend finds it now (the CPU) or at the
/// next read-back (a GPU, whose kernel records it under this mark: the loss cannot wait for
/// the check without a sync per step).
fn by_class<T>(op: &'static str, classes: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
    with_index_use(IndexUse::Class { op, classes }, f)
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
        by_class("nll_loss", self.shape()[1], || match reduction {
            Reduction::None => neg_picked(self, targets),
            _ => {
                let (logp, targets) = (self.contiguous()?, targets.contiguous()?);
                Ok(Tensor::custom(NllLoss { mean: reduction == Reduction::Mean }, &[&logp, &targets])?.remove(0))
            }
        })
    }

    /// Cross-entropy of `[N, C]` logits against i64 class `targets` `[N]`.
    pub fn cross_entropy(&self, targets: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.cross_entropy(targets, reduction);
        }
        if self.rank() != 2 {
            return Err(Error::shape("cross_entropy", self.shape(), targets.shape(), "must be [N, C] logits and [N] class indices"));
        }
        let logp = self.log_softmax(1usize)?;
        by_class("cross_entropy", self.shape()[1], || logp.nll_loss(targets, reduction))
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

    /// Mean absolute error, `|x - y|` (`torch.nn.functional.l1_loss`).
    ///
    /// # Shapes
    /// - `self`, `target`: `[*]`, the same shape
    /// - result: `[*]` for `Reduction::None`, else a scalar
    pub fn l1_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        if let Some([x, t]) = crate::autocast::widened([self, target])? {
            return x.l1_loss(&t, reduction);
        }
        check_same_shape("l1_loss", self, target)?;
        Reduction::apply(reduction, self.sub(target)?.abs()?)
    }

    /// Kullback-Leibler divergence `KL(target || exp(self))` for log-probabilities `self`
    /// (`torch.nn.functional.kl_div`): pointwise `target (log target - self)`, 0 where
    /// `target = 0`; with `log_target`, the target is given as log-probabilities and the
    /// pointwise value is `exp(target) (target - self)`. `reduction` takes a [`Reduction`] or
    /// a [`KlReduction`] (for `BatchMean`, the sum divided by `N`).
    ///
    /// # Shapes
    /// - `self`, `target`: `[N, *]`, the same shape
    /// - result: `[N, *]` for `None`, else a scalar
    pub fn kl_div(&self, target: &Tensor, reduction: impl Into<KlReduction>, log_target: bool) -> Result<Tensor> {
        if let Some([x, t]) = crate::autocast::widened([self, target])? {
            return x.kl_div(&t, reduction, log_target);
        }
        check_float("kl_div", self)?;
        check_same_shape("kl_div", self, target)?;
        let per = if log_target {
            target.exp()?.mul(&target.sub(self)?)?
        } else {
            // xlogy(t, t) - t x: log(1) = 0 stands in where t = 0, in value and in gradient.
            let safe = Tensor::where_cond(&target.eq_scalar(0.0)?, &target.scalar_like(1.0)?, target)?;
            target.mul(&safe.log()?.sub(self)?)?
        };
        match reduction.into() {
            KlReduction::None => Ok(per),
            KlReduction::Mean => per.mean_all(),
            KlReduction::Sum => per.sum_all(),
            KlReduction::BatchMean if per.rank() == 0 => per.sum_all(),
            KlReduction::BatchMean => per.sum_all()?.div_scalar(per.shape()[0] as f64),
        }
    }

    /// Cross-entropy of logits against i64 class targets with PyTorch's options
    /// (`torch.nn.functional.cross_entropy`): per target `n`, with `w = weight` (or ones),
    /// `logp = log_softmax(logits, 1)` and `ε = label_smoothing`,
    /// `loss_n = (1 - ε) (-w[y_n] logp[n, y_n]) + ε / C * sum_c (-w[c] logp[n, c])`,
    /// and 0 where `y_n = ignore_index`. `Mean` divides the sum by `sum_n w[y_n]` over the
    /// targets not ignored (NaN if all are ignored, as PyTorch).
    ///
    /// # Shapes
    /// - `self`: `[N, C]` or `[N, C, *]` logits
    /// - `targets`: i64 `[N]` or `[N, *]`, each in `0..C` or equal to `ignore_index`
    /// - result: the targets' shape for `Reduction::None`, else a scalar
    pub fn cross_entropy_with(&self, targets: &Tensor, options: CrossEntropyOptions, reduction: Reduction) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.cross_entropy_with(targets, options, reduction);
        }
        const OP: &str = "cross_entropy";
        check_float(OP, self)?;
        if self.rank() < 2 {
            return Err(Error::shape(OP, self.shape(), targets.shape(), "must be [N, C, *] logits and [N, *] class indices"));
        }
        if !(0.0..=1.0).contains(&options.label_smoothing) {
            return Err(Error::bad_shape(OP, self.shape(), format!("label_smoothing {} is outside [0, 1]", options.label_smoothing)));
        }
        self.log_softmax(1usize)?.weighted_nll(OP, targets, options, reduction)
    }

    /// Negative log-likelihood of log-probabilities at i64 class targets, with optional class
    /// weights and an ignored index (`torch.nn.functional.nll_loss`):
    /// `loss_n = -weight[y_n] self[n, y_n]`, 0 where `y_n = ignore_index`; `Mean` divides by
    /// the sum of `weight[y_n]` over the targets not ignored.
    ///
    /// # Shapes
    /// - `self`: `[N, C]` or `[N, C, *]` log-probabilities; `weight`: `[C]`
    /// - `targets`: i64 `[N]` or `[N, *]`
    /// - result: the targets' shape for `Reduction::None`, else a scalar
    pub fn nll_loss_with(&self, targets: &Tensor, weight: Option<&Tensor>, ignore_index: Option<i64>, reduction: Reduction) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.nll_loss_with(targets, weight, ignore_index, reduction);
        }
        check_float("nll_loss", self)?;
        self.weighted_nll("nll_loss", targets, CrossEntropyOptions { weight, ignore_index, label_smoothing: 0.0 }, reduction)
    }

    /// The shared body of `nll_loss_with` and `cross_entropy_with`, on log-probabilities.
    fn weighted_nll(&self, op: &'static str, targets: &Tensor, options: CrossEntropyOptions, reduction: Reduction) -> Result<Tensor> {
        let (s, ts) = (self.shape(), targets.shape());
        let mut want_t = s.to_vec();
        if s.len() >= 2 {
            want_t.remove(1);
        }
        if s.len() < 2 || ts != want_t.as_slice() {
            return Err(Error::shape(op, s, ts, "must be [N, C, *] and [N, *] class indices (the input's shape without dim 1)"));
        }
        if targets.dtype() != DType::I64 {
            return Err(Error::dtype(op, targets.dtype(), "targets must be i64 class indices"));
        }
        check_same_device(op, self, targets)?;
        let c = s[1];
        if let Some(w) = options.weight {
            check_same_dtype(op, self, w)?;
            check_same_device(op, self, w)?;
            if w.shape() != [c] {
                return Err(Error::shape(op, s, w.shape(), format!("input and weight disagree: the weight must be [C] = [{c}]")));
            }
        }
        // Fold `[N, C, *]` into `[M, C]` rows with the classes last.
        let m = targets.numel();
        let (logp, t) = if s.len() == 2 {
            (self.clone(), targets.clone())
        } else {
            let mut perm: Vec<usize> = (0..s.len()).filter(|&d| d != 1).collect();
            perm.push(1);
            (self.permute(&perm)?.reshape(&[m, c])?, targets.reshape(&[m])?)
        };
        // Ignored targets read class 0 (any valid index) and are masked out after.
        let (t, valid) = match options.ignore_index {
            None => (t, None),
            Some(ig) => {
                let keep = t.ne(&Tensor::scalar(ig as f64, DType::I64, t.device())?)?;
                let t = Tensor::where_cond(&keep, &t, &Tensor::scalar(0.0, DType::I64, t.device())?)?;
                (t, Some(keep.to_dtype(self.dtype())?))
            }
        };
        // Each target's weight in the loss and in the mean's divisor: weight[y_n] * valid_n.
        let factor = match (options.weight, &valid) {
            (None, None) => None,
            (None, Some(v)) => Some(v.clone()),
            (Some(w), None) => Some(by_class(op, c, || w.index_select(0usize, &t))?),
            (Some(w), Some(v)) => Some(by_class(op, c, || w.index_select(0usize, &t))?.mul(v)?),
        };
        let picked = by_class(op, c, || logp.gather(1usize, &t.unsqueeze(1usize)?))?.squeeze(1usize)?.neg()?;
        let mut per = match &factor {
            Some(f) => picked.mul(f)?,
            None => picked,
        };
        let eps = options.label_smoothing;
        if eps > 0.0 {
            let weighted = match options.weight {
                Some(w) => logp.mul(&w.reshape(&[1, c])?)?,
                None => logp,
            };
            let mut smooth = weighted.sum(&[1], false)?.neg()?;
            if let Some(v) = &valid {
                smooth = smooth.mul(v)?;
            }
            per = per.mul_scalar(1.0 - eps)?.add(&smooth.mul_scalar(eps / c as f64)?)?;
        }
        match (reduction, factor) {
            (Reduction::None, _) => per.reshape(ts),
            (Reduction::Mean, Some(f)) => per.sum_all()?.div(&f.sum_all()?),
            (r, _) => Reduction::apply(r, per),
        }
    }
}

/// `-logp[i, t_i]` for each row i: the unreduced negative log-likelihood.
fn neg_picked(logp: &Tensor, targets: &Tensor) -> Result<Tensor> {
    logp.gather(1usize, &targets.unsqueeze(1usize)?)?.squeeze(1usize)?.neg()
}

/// The negative log-likelihood of `[N, C]` log-probabilities at i64 class targets, over the N
/// rows: `-sum_i logp[i, t_i]`, divided by N where `mean` ([`Tensor::nll_loss`] summed or
/// averaged; a classifier's cross-entropy after its log-softmax). Inputs: `logp` `[N, C]`,
/// `targets` `[N]` (i64), both contiguous. Output: the loss, a scalar of logp's dtype. A kernel
/// reports a target outside `0..C` as the composite's gather does. One kernel each way where
/// the composite takes four forward (gather, neg, sum, div) and four backward.
#[derive(Clone, Copy, Debug)]
pub struct NllLoss {
    pub mean: bool,
}

impl CustomOp for NllLoss {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(Vec::new(), inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let reduction = if self.mean { Reduction::Mean } else { Reduction::Sum };
        Ok(vec![reduction.apply(neg_picked(inputs[0], inputs[1])?)?])
    }

    /// Where no kernel runs, the primitives' own graph: the gradient bit for bit as their rules
    /// give it.
    fn composite_has_grad(&self) -> bool {
        true
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], _outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (logp, targets) = (&inputs[0], &inputs[1]);
        let op = NllLossBackward { mean: self.mean, classes: logp.shape()[1] };
        let dx = fused::run_or_composite(&op, &[&grad.contiguous()?, targets])?.remove(0);
        Ok(vec![Some(dx), None])
    }

    /// The backward reads the targets, and of `logp` only its shape.
    fn reads_input(&self, i: usize) -> bool {
        i == 1
    }
}

/// The gradient of [`NllLoss`] with respect to `logp`: `-g` (`-(g / N)` where `mean`) at each
/// row's target, zero elsewhere. Inputs: `g`, the loss's gradient (a scalar), and `targets`
/// `[N]` (i64), contiguous. Output: `[N, classes]` of g's dtype.
#[derive(Clone, Copy, Debug)]
pub struct NllLossBackward {
    pub mean: bool,
    pub classes: usize,
}

impl CustomOp for NllLossBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(vec![inputs[1].shape()[0], self.classes], inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (g, targets) = (inputs[0], inputs[1]);
        let n = targets.shape()[0];
        let g = if self.mean { g.div_scalar(n as f64)? } else { g.clone() };
        let src = g.neg()?.reshape(&[1, 1])?.expand(&[n, 1])?;
        let zeros = Tensor::zeros(&[n, self.classes], g.dtype(), g.device())?;
        Ok(vec![zeros.scatter_add(1usize, &targets.unsqueeze(1usize)?, &src)?])
    }
}

crate::custom_kernel_name! {
    NllLoss => "nll_loss",
    NllLossBackward => "nll_loss_backward",
}
