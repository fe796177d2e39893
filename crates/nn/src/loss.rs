//! Loss modules, as `torch.nn`'s: a struct whose public fields are the constructor's keyword
//! arguments (with PyTorch's defaults from `new()` / `Default`, and `with_*` builders) and a
//! `forward(input, target)`. Each is a thin layer over the functional losses of
//! `liandan-tensor` ([`Tensor::cross_entropy_with`], [`Tensor::bce_loss`], [`Tensor::kl_div`],
//! ...), which check shapes, dtypes and devices; what those ops lack (BCE weights,
//! `pos_weight`, probability targets, unbatched inputs) is composed here from other ops.
//!
//! Like PyTorch's, the modules with a `weight` (or `pos_weight`) hold it as a buffer under that
//! state-dict name, so [`ModuleExt::to_device`](crate::ModuleExt::to_device) moves it along.
//!
//! Dimension letters: N batch, C classes; `*` any further dims.

use liandan_tensor::layout::broadcast_shapes;
use liandan_tensor::{CrossEntropyOptions, KlReduction, Reduction, Tensor};

use crate::error::Result;
use crate::impl_module;

/// `t` summed or averaged over every element, or left as it is.
fn reduce(t: Tensor, reduction: Reduction) -> Result<Tensor> {
    Ok(match reduction {
        Reduction::None => t,
        Reduction::Mean => t.mean_all()?,
        Reduction::Sum => t.sum_all()?,
    })
}

/// Checks that `w` broadcasts to exactly `shape` (PyTorch expands a weight to the input's size,
/// so a weight that would enlarge the result is an error, not a bigger loss).
fn check_weight(op: &'static str, what: &str, w: &Tensor, shape: &[usize]) -> Result<()> {
    if broadcast_shapes(op, w.shape(), shape)? != shape {
        let detail = format!("the {what} {:?} must broadcast to the input's shape {shape:?}", w.shape());
        return Err(liandan_tensor::Error::ShapeMismatch { op, lhs: shape.to_vec(), rhs: w.shape().to_vec(), detail }.into());
    }
    Ok(())
}

/// Sets `with_<field>` builders: `value` for plain fields, `Some(value)` for optional tensors.
macro_rules! builders {
    ($ty:ty { $($method:ident : $field:ident : $t:ty),* $(,)? } $({ $($omethod:ident : $ofield:ident),* $(,)? })?) => {
        impl $ty {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $method(mut self, $field: $t) -> Self {
                    self.$field = $field;
                    self
                }
            )*
            $($(
                #[doc = concat!("Sets `", stringify!($ofield), "`.")]
                pub fn $omethod(mut self, $ofield: Tensor) -> Self {
                    self.$ofield = Some($ofield);
                    self
                }
            )*)?
        }
    };
}

/// Cross-entropy of logits against class indices or class probabilities
/// (`torch.nn.CrossEntropyLoss`).
///
/// With class-index targets, per target `n` (with `w = weight` or ones, `ε = label_smoothing`,
/// `logp = log_softmax(input, 1)`): `loss_n = (1 - ε) (-w[y_n] logp[n, y_n]) + ε / C sum_c
/// (-w[c] logp[n, c])`, 0 where `y_n = ignore_index`; `Mean` divides by `sum_n w[y_n]` over the
/// targets not ignored (NaN when all are ignored, as PyTorch). With probability targets (a float
/// tensor of the input's shape), `loss_n = -sum_c w[c] ((1 - ε) y[n, c] + ε / C) logp[n, c]`,
/// `ignore_index` plays no part, and `Mean` divides by the number of rows.
///
/// # Shapes
/// - `input`: `[N, C]`, `[N, C, *]` or unbatched `[C]` logits
/// - `target`: i64 class indices `[N]`, `[N, *]` or `[]`, each in `0..C` or `ignore_index`;
///   or probabilities of the input's shape and dtype
/// - `weight`: `[C]`
/// - output: the shape of the class-index target (the input's without dim 1) for
///   `Reduction::None`, else a scalar
///
/// ```
/// use liandan_nn::loss::CrossEntropyLoss;
/// use liandan_nn::{Device, Reduction, Tensor};
/// # fn main() -> liandan_nn::Result<()> {
/// let dev = Device::cpu();
/// let logits = Tensor::from_vec(vec![2.0f32, 0.0, 0.0, 0.0, 0.0, 2.0], &[2, 3], &dev)?.requires_grad_(true)?;
/// let target = Tensor::from_vec(vec![0i64, 2], &[2], &dev)?;
/// let loss = CrossEntropyLoss::new().forward(&logits, &target)?;
/// // -log(e^2 / (e^2 + 2)) for both rows.
/// assert!((loss.to_vec_f64()?[0] - 0.2395447).abs() < 1e-6);
/// loss.backward()?;
///
/// // Class weights, an ignored index and label smoothing, as PyTorch's keyword arguments.
/// let weight = Tensor::from_vec(vec![1.0f32, 2.0, 0.5], &[3], &dev)?;
/// let ce = CrossEntropyLoss::new().with_weight(weight).with_ignore_index(1).with_label_smoothing(0.1).with_reduction(Reduction::Sum);
/// let total = ce.forward(&logits, &target)?;
/// assert_eq!(total.shape(), &[] as &[usize]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct CrossEntropyLoss {
    /// Per-class weights `[C]`, of the input's dtype (default none: all ones).
    pub weight: Option<Tensor>,
    /// Class-index targets equal to this contribute nothing (default -100).
    pub ignore_index: i64,
    pub reduction: Reduction,
    /// `ε` in `[0, 1]`: the target becomes `(1 - ε) target + ε / C` (default 0).
    pub label_smoothing: f64,
}

impl Default for CrossEntropyLoss {
    fn default() -> Self {
        CrossEntropyLoss { weight: None, ignore_index: -100, reduction: Reduction::Mean, label_smoothing: 0.0 }
    }
}

builders!(CrossEntropyLoss { with_ignore_index: ignore_index: i64, with_reduction: reduction: Reduction, with_label_smoothing: label_smoothing: f64 } { with_weight: weight });
impl_module!(CrossEntropyLoss { buffers: [weight] });

impl CrossEntropyLoss {
    /// PyTorch's defaults: no weight, `ignore_index = -100`, mean, no smoothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss of logits `input` against `target` (see the type's docs for the shapes).
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        unbatched(input, target, self.reduction, |x, y| {
            if y.dtype().is_float() {
                return self.soft_targets(x, y);
            }
            let options = CrossEntropyOptions { weight: self.weight.as_ref(), ignore_index: Some(self.ignore_index), label_smoothing: self.label_smoothing };
            Ok(x.cross_entropy_with(y, options, self.reduction)?)
        })
    }

    /// Cross-entropy against class probabilities, which `cross_entropy_with` does not take.
    fn soft_targets(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let s = input.shape();
        if s.len() < 2 || target.shape() != s {
            let detail = "must be [N, C, *] logits and probabilities of the same shape (or i64 class indices [N, *])";
            return Err(liandan_tensor::Error::ShapeMismatch { op: OP, lhs: s.to_vec(), rhs: target.shape().to_vec(), detail: detail.into() }.into());
        }
        let (c, eps) = (s[1], self.label_smoothing);
        if !(0.0..=1.0).contains(&eps) {
            return Err(liandan_tensor::Error::BadShape { op: OP, shape: s.to_vec(), detail: format!("label_smoothing {eps} is outside [0, 1]") }.into());
        }
        let target = if eps > 0.0 { target.mul_scalar(1.0 - eps)?.add_scalar(eps / c as f64)? } else { target.clone() };
        let mut prod = input.log_softmax(1usize)?.mul(&target)?;
        if let Some(w) = &self.weight {
            if w.shape() != [c] {
                let detail = format!("input and weight disagree: the weight must be [C] = [{c}]");
                return Err(liandan_tensor::Error::ShapeMismatch { op: OP, lhs: s.to_vec(), rhs: w.shape().to_vec(), detail }.into());
            }
            let mut ws = vec![1; s.len()];
            ws[1] = c;
            prod = prod.mul(&w.reshape(&ws)?)?;
        }
        reduce(prod.sum(&[1], false)?.neg()?, self.reduction)
    }
}

/// Runs a classification loss on an unbatched `[C]` input (with a `[]` class index or `[C]`
/// probabilities) as a batch of one, as PyTorch does; anything else goes through unchanged.
fn unbatched(input: &Tensor, target: &Tensor, reduction: Reduction, f: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let probabilities = target.dtype().is_float() && target.rank() == 1;
    if input.rank() != 1 || !(target.rank() == 0 || probabilities) {
        return f(input, target);
    }
    let c = input.shape()[0];
    let target = if probabilities { target.reshape(&[1, target.shape()[0]])? } else { target.reshape(&[1])? };
    let out = f(&input.reshape(&[1, c])?, &target)?;
    if reduction == Reduction::None {
        Ok(out.reshape(&[])?)
    } else {
        Ok(out)
    }
}

/// Negative log-likelihood of log-probabilities at class indices (`torch.nn.NLLLoss`):
/// `loss_n = -weight[y_n] input[n, y_n]`, 0 where `y_n = ignore_index`; `Mean` divides by the
/// sum of `weight[y_n]` over the targets not ignored.
///
/// # Shapes
/// - `input`: `[N, C]`, `[N, C, *]` or unbatched `[C]` log-probabilities; `weight`: `[C]`
/// - `target`: i64 `[N]`, `[N, *]` or `[]`
/// - output: the target's shape for `Reduction::None`, else a scalar
#[derive(Clone, Debug)]
pub struct NLLLoss {
    /// Per-class weights `[C]` (default none: all ones).
    pub weight: Option<Tensor>,
    /// Targets equal to this contribute nothing (default -100).
    pub ignore_index: i64,
    pub reduction: Reduction,
}

impl Default for NLLLoss {
    fn default() -> Self {
        NLLLoss { weight: None, ignore_index: -100, reduction: Reduction::Mean }
    }
}

builders!(NLLLoss { with_ignore_index: ignore_index: i64, with_reduction: reduction: Reduction } { with_weight: weight });
impl_module!(NLLLoss { buffers: [weight] });

impl NLLLoss {
    /// PyTorch's defaults: no weight, `ignore_index = -100`, mean.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss of log-probabilities `input` at the class indices `target`.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        unbatched(input, target, self.reduction, |x, y| Ok(x.nll_loss_with(y, self.weight.as_ref(), Some(self.ignore_index), self.reduction)?))
    }
}

/// A loss of an input and a target of its shape whose one option is the reduction: the struct,
/// its builder, and `forward` as the tensor op `$op`.
macro_rules! pointwise_loss {
    ($(#[$doc:meta])* $name:ident, $op:ident) => {
        $(#[$doc])*
        ///
        /// # Shapes
        /// - `input`, `target`: `[*]`, the same shape
        /// - output: `[*]` for `Reduction::None`, else a scalar
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name {
            pub reduction: Reduction,
        }

        builders!($name { with_reduction: reduction: Reduction });
        impl_module!($name {});

        impl $name {
            /// PyTorch's default: mean.
            pub fn new() -> Self {
                Self::default()
            }

            pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
                Ok(input.$op(target, self.reduction)?)
            }
        }
    };
}

pointwise_loss!(
    /// Squared error `(x - y)^2` (`torch.nn.MSELoss`).
    MSELoss,
    mse_loss
);
pointwise_loss!(
    /// Absolute error `|x - y|` (`torch.nn.L1Loss`).
    L1Loss,
    l1_loss
);

/// Binary cross-entropy of probabilities (`torch.nn.BCELoss`):
/// `-weight (y max(log p, -100) + (1 - y) max(log(1 - p), -100))`, finite where a saturated
/// sigmoid gives exactly 0 or 1. The gradient there is that of the clamped expression (PyTorch's
/// backward instead divides by `max(p (1 - p), 1e-12)`); [`BCEWithLogitsLoss`] is stabler.
///
/// # Shapes
/// - `input` (probabilities in `[0, 1]`), `target`: `[*]`, the same shape
/// - `weight`: any shape that broadcasts to the input's
/// - output: `[*]` for `Reduction::None`, else a scalar
#[derive(Clone, Debug, Default)]
pub struct BCELoss {
    /// A rescaling weight per element (default none).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}

builders!(BCELoss { with_reduction: reduction: Reduction } { with_weight: weight });
impl_module!(BCELoss { buffers: [weight] });

impl BCELoss {
    /// PyTorch's defaults: no weight, mean.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        let mut per = input.bce_loss(target, Reduction::None)?;
        if let Some(w) = &self.weight {
            check_weight("bce_loss", "weight", w, input.shape())?;
            per = per.mul(w)?;
        }
        reduce(per, self.reduction)
    }
}

/// Binary cross-entropy on logits (`torch.nn.BCEWithLogitsLoss`), finite for any logit:
/// `weight ((1 - y) x + (1 + (pos_weight - 1) y) softplus(-x))`, which for `pos_weight = 1` is
/// `max(x, 0) - x y + log(1 + exp(-|x|))`. `pos_weight` weighs the positive term of each class
/// (`> 1` raises recall).
///
/// # Shapes
/// - `input` (logits), `target`: `[*]`, the same shape
/// - `weight`, `pos_weight`: shapes that broadcast to the input's (`pos_weight` usually `[C]`
///   for `[N, C]` inputs)
/// - output: `[*]` for `Reduction::None`, else a scalar
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// A rescaling weight per element (default none).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
    /// A weight of the positive examples, per class (default none: 1).
    pub pos_weight: Option<Tensor>,
}

builders!(BCEWithLogitsLoss { with_reduction: reduction: Reduction } { with_weight: weight, with_pos_weight: pos_weight });
impl_module!(BCEWithLogitsLoss { buffers: [weight, pos_weight] });

impl BCEWithLogitsLoss {
    /// PyTorch's defaults: no weight, mean, no `pos_weight`.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "bce_with_logits";
        if input.shape() != target.shape() {
            let detail = "input and target must have the same shape";
            return Err(
                liandan_tensor::Error::ShapeMismatch { op: OP, lhs: input.shape().to_vec(), rhs: target.shape().to_vec(), detail: detail.into() }.into()
            );
        }
        // (1 - y) x + w softplus(-x); without pos_weight, the functional `bce_with_logits`.
        let mut per = target.neg()?.add_scalar(1.0)?.mul(input)?;
        per = match &self.pos_weight {
            None => per.add(&softplus_neg(input)?)?,
            Some(pw) => {
                check_weight(OP, "pos_weight", pw, input.shape())?;
                let log_weight = pw.sub_scalar(1.0)?.mul(target)?.add_scalar(1.0)?;
                per.add(&log_weight.mul(&softplus_neg(input)?)?)?
            }
        };
        if let Some(w) = &self.weight {
            check_weight(OP, "weight", w, input.shape())?;
            per = per.mul(w)?;
        }
        reduce(per, self.reduction)
    }
}

/// `softplus(-x) = -log(sigmoid(x))`, finite for every x, with the gradient `-sigmoid(-x)`.
fn softplus_neg(x: &Tensor) -> Result<Tensor> {
    Ok(x.neg()?.softplus()?)
}

/// Kullback-Leibler divergence `KL(target || exp(input))` of log-probabilities `input`
/// (`torch.nn.KLDivLoss`): pointwise `y (log y - x)`, 0 where `y = 0`, or with `log_target`
/// (the target given as log-probabilities) `exp(y) (y - x)`. `KlReduction::BatchMean` divides
/// the sum by N and is the true KL divergence; `Mean`, PyTorch's default, divides by every
/// element.
///
/// # Shapes
/// - `input`, `target`: `[N, *]`, the same shape
/// - output: `[N, *]` for `KlReduction::None`, else a scalar
#[derive(Clone, Copy, Debug, Default)]
pub struct KLDivLoss {
    pub reduction: KlReduction,
    /// Whether the target holds log-probabilities (default false).
    pub log_target: bool,
}

builders!(KLDivLoss { with_reduction: reduction: KlReduction, with_log_target: log_target: bool });
impl_module!(KLDivLoss {});

impl KLDivLoss {
    /// PyTorch's defaults: mean (per element), probabilities as the target.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        Ok(input.kl_div(target, self.reduction, self.log_target)?)
    }
}
