//! Normalization layers: `BatchNorm1d`, `BatchNorm2d`, `LayerNorm` and `GroupNorm`
//! (`torch.nn.*Norm*`). Affine weights start at 1 and biases at 0, as PyTorch.

use liandan_tensor::{DType, Device, Tensor};

use super::{full_param, with_fields};
use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// Configuration of a batch norm over `D` spatial-ish dims: [`BatchNorm1dConfig`] or
/// [`BatchNorm2dConfig`] (`torch.nn.BatchNorm1d(num_features, eps=1e-5, momentum=0.1,
/// affine=True, track_running_stats=True)`). A `momentum` of `None` (PyTorch's cumulative
/// moving average) is not supported.
#[derive(Clone, Debug)]
pub struct BatchNormConfig<const D: usize> {
    /// C, the channels.
    pub num_features: usize,
    /// Default 1e-5.
    pub eps: f64,
    /// Weight of the new batch in the running statistics; default 0.1.
    pub momentum: f64,
    /// Learnable per-channel `weight` and `bias`; default true.
    pub affine: bool,
    /// Keep `running_mean`, `running_var` and `num_batches_tracked` buffers; default true.
    /// Without them the layer normalizes with batch statistics in eval mode too.
    pub track_running_stats: bool,
}

/// Configuration of a [`BatchNorm1d`].
pub type BatchNorm1dConfig = BatchNormConfig<1>;
/// Configuration of a [`BatchNorm2d`].
pub type BatchNorm2dConfig = BatchNormConfig<2>;

with_fields!(BatchNormConfig<1> { with_eps: eps: f64, with_momentum: momentum: f64, with_affine: affine: bool, with_track_running_stats: track_running_stats: bool });
with_fields!(BatchNormConfig<2> { with_eps: eps: f64, with_momentum: momentum: f64, with_affine: affine: bool, with_track_running_stats: track_running_stats: bool });

impl<const D: usize> BatchNormConfig<D> {
    pub fn new(num_features: usize) -> Self {
        BatchNormConfig { num_features, eps: 1e-5, momentum: 0.1, affine: true, track_running_stats: true }
    }

    /// A layer on `device` in training mode: weight 1, bias 0, running_mean 0, running_var 1
    /// (F32) and num_batches_tracked 0 (an I64 scalar), as PyTorch.
    pub fn init(&self, device: &Device) -> Result<BatchNorm<D>> {
        let c = self.num_features;
        let (weight, bias) = if self.affine { (Some(full_param(&[c], 1.0, device)?), Some(full_param(&[c], 0.0, device)?)) } else { (None, None) };
        let (running_mean, running_var, num_batches_tracked) = if self.track_running_stats {
            (Some(Tensor::zeros(&[c], DType::F32, device)?), Some(Tensor::ones(&[c], DType::F32, device)?), Some(Tensor::scalar(0.0, DType::I64, device)?))
        } else {
            (None, None, None)
        };
        Ok(BatchNorm { weight, bias, running_mean, running_var, num_batches_tracked, config: self.clone(), training: true })
    }
}

/// Batch normalization over every axis but the channel axis 1; see [`BatchNorm1d`] and
/// [`BatchNorm2d`].
///
/// In training it normalizes with the batch's mean and (biased) variance, blends the batch's
/// mean and unbiased variance into the running statistics with `momentum`, and counts the
/// batch in `num_batches_tracked`; in eval it normalizes with the running statistics.
///
/// State-dict keys: `weight`, `bias` (parameters), `running_mean`, `running_var`,
/// `num_batches_tracked` (buffers), in that order.
#[derive(Clone, Debug)]
pub struct BatchNorm<const D: usize> {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub running_mean: Option<Tensor>,
    pub running_var: Option<Tensor>,
    pub num_batches_tracked: Option<Tensor>,
    pub config: BatchNormConfig<D>,
    pub training: bool,
}

impl_module!(impl[const D: usize] BatchNorm<D> { params: [weight, bias], buffers: [running_mean, running_var, num_batches_tracked], mode: training });

/// Batch norm of `[N, C]` or `[N, C, L]` inputs (`torch.nn.BatchNorm1d`).
///
/// # Shapes
/// - input: `[N, C]` or `[N, C, L]`
/// - `weight`, `bias`, `running_mean`, `running_var`: `[C]`; `num_batches_tracked`: `[]`
/// - output: the input's shape
pub type BatchNorm1d = BatchNorm<1>;

/// Batch norm of images (`torch.nn.BatchNorm2d`).
///
/// # Shapes
/// - input: `[N, C, H, W]`
/// - `weight`, `bias`, `running_mean`, `running_var`: `[C]`; `num_batches_tracked`: `[]`
/// - output: `[N, C, H, W]`
pub type BatchNorm2d = BatchNorm<2>;

impl<const D: usize> Forward for BatchNorm<D> {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.normalize(x, false)
    }

    /// One op in training where the device applies ReLU inside batch norm's kernels
    /// ([`Tensor::batch_norm_relu`]), the two otherwise.
    fn forward_relu(&self, x: &Tensor) -> Result<Tensor> {
        if !self.training {
            // No kernel to share in eval; the ReLU stays outside the layer, where traced
            // graphs (ONNX export) and summaries put it.
            return Ok(self.forward(x)?.relu()?);
        }
        crate::summary::scope(self, || self.normalize(x, true))
    }
}

impl<const D: usize> BatchNorm<D> {
    /// The layer's forward, through a ReLU where `relu`.
    fn normalize(&self, x: &Tensor, relu: bool) -> Result<Tensor> {
        let (ranks, name): (&[usize], _) = if D == 1 { (&[2, 3], "BatchNorm1d") } else { (&[D + 2], "BatchNorm2d") };
        if !ranks.contains(&x.rank()) {
            return Err(liandan_tensor::Error::BadShape {
                op: name,
                shape: x.shape().to_vec(),
                detail: format!("expects an input of rank {ranks:?} with channels on axis 1"),
            }
            .into());
        }
        let c = &self.config;
        // As PyTorch: batch statistics in training, or whenever there are no running ones.
        let use_batch_stats = self.training || self.running_mean.is_none();
        let (rm, rv, w, b) = (self.running_mean.as_ref(), self.running_var.as_ref(), self.weight.as_ref(), self.bias.as_ref());
        // Counted in training only (then batch statistics are in use too).
        let counter = self.num_batches_tracked.as_ref().filter(|_| self.training);
        Ok(x.batch_norm_tracked(rm, rv, counter, w, b, use_batch_stats, c.momentum, c.eps, relu)?)
    }
}

/// Configuration of a [`LayerNorm`] (`torch.nn.LayerNorm(normalized_shape, eps=1e-5,
/// elementwise_affine=True, bias=True)`).
#[derive(Clone, Debug)]
pub struct LayerNormConfig {
    /// The trailing dims normalized over, e.g. `[D]`.
    pub normalized_shape: Vec<usize>,
    /// Default 1e-5.
    pub eps: f64,
    /// Learnable `weight` (and `bias`, see below); default true.
    pub elementwise_affine: bool,
    /// Learnable `bias` when `elementwise_affine`; default true.
    pub bias: bool,
}

with_fields!(LayerNormConfig { with_eps: eps: f64, with_elementwise_affine: elementwise_affine: bool, with_bias: bias: bool });

impl LayerNormConfig {
    pub fn new(normalized_shape: &[usize]) -> Self {
        LayerNormConfig { normalized_shape: normalized_shape.to_vec(), eps: 1e-5, elementwise_affine: true, bias: true }
    }

    /// A layer on `device`: weight 1, bias 0, F32.
    pub fn init(&self, device: &Device) -> Result<LayerNorm> {
        let s = &self.normalized_shape;
        let weight = if self.elementwise_affine { Some(full_param(s, 1.0, device)?) } else { None };
        let bias = if self.elementwise_affine && self.bias { Some(full_param(s, 0.0, device)?) } else { None };
        Ok(LayerNorm { weight, bias, config: self.clone() })
    }
}

/// Layer normalization over the trailing `normalized_shape` dims.
///
/// State-dict keys: `weight`, `bias`.
///
/// # Shapes
/// - input: `[*, normalized_shape...]`
/// - `weight`, `bias`: `normalized_shape`
/// - output: the input's shape
#[derive(Clone, Debug)]
pub struct LayerNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub config: LayerNormConfig,
}

impl_module!(LayerNorm { params: [weight, bias] });

impl Forward for LayerNorm {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let s = &self.config.normalized_shape;
        if x.rank() < s.len() || &x.shape()[x.rank() - s.len()..] != s.as_slice() {
            return Err(liandan_tensor::Error::ShapeMismatch {
                op: "LayerNorm",
                lhs: x.shape().to_vec(),
                rhs: s.clone(),
                detail: "the input's trailing dims must equal normalized_shape".into(),
            }
            .into());
        }
        Ok(x.layer_norm(s.len(), self.weight.as_ref(), self.bias.as_ref(), self.config.eps)?)
    }
}

impl LayerNorm {
    /// `(self.forward(&s), s)` with `s = x + residual`: a residual stream's add and the norm
    /// of its sum, as one op where the device has one ([`Tensor::add_layer_norm`]), which
    /// normalizes the sum as it writes it. The same values and gradients as the add then
    /// [`Forward::forward`].
    pub fn forward_add(&self, x: &Tensor, residual: &Tensor) -> Result<(Tensor, Tensor)> {
        let s = &self.config.normalized_shape;
        let shaped = x.rank() >= s.len() && &x.shape()[x.rank() - s.len()..] == s.as_slice() && x.shape() == residual.shape();
        // An observer (export, anomaly detection) sees the add in the caller's layer, as before
        // the norm; otherwise the norm's layer holds both. A bad shape is reported by the ops.
        if !shaped || liandan_tensor::observe::active() {
            let sum = x.add(residual)?;
            return Ok((self.forward(&sum)?, sum));
        }
        crate::summary::scope(self, || {
            let (sum, y) = x.add_layer_norm(residual, s.len(), self.weight.as_ref(), self.bias.as_ref(), self.config.eps)?;
            Ok((y, sum))
        })
    }
}

/// Configuration of a [`GroupNorm`] (`torch.nn.GroupNorm(num_groups, num_channels, eps=1e-5,
/// affine=True)`).
#[derive(Clone, Debug)]
pub struct GroupNormConfig {
    pub num_groups: usize,
    pub num_channels: usize,
    /// Default 1e-5.
    pub eps: f64,
    /// Learnable per-channel `weight` and `bias`; default true.
    pub affine: bool,
}

with_fields!(GroupNormConfig { with_eps: eps: f64, with_affine: affine: bool });

impl GroupNormConfig {
    pub fn new(num_groups: usize, num_channels: usize) -> Self {
        GroupNormConfig { num_groups, num_channels, eps: 1e-5, affine: true }
    }

    /// A layer on `device`: weight 1, bias 0, F32.
    pub fn init(&self, device: &Device) -> Result<GroupNorm> {
        if self.num_groups == 0 || !self.num_channels.is_multiple_of(self.num_groups) {
            return Err(liandan_tensor::Error::BadShape {
                op: "GroupNorm",
                shape: vec![self.num_channels],
                detail: format!("num_channels must be divisible by num_groups = {}", self.num_groups),
            }
            .into());
        }
        let c = self.num_channels;
        let (weight, bias) = if self.affine { (Some(full_param(&[c], 1.0, device)?), Some(full_param(&[c], 0.0, device)?)) } else { (None, None) };
        Ok(GroupNorm { weight, bias, config: self.clone() })
    }
}

/// Group normalization: channels split into `num_groups` groups, each normalized over its
/// channels and all positions.
///
/// State-dict keys: `weight`, `bias`.
///
/// # Shapes
/// - input: `[N, C, *]`
/// - `weight`, `bias`: `[C]`
/// - output: the input's shape
#[derive(Clone, Debug)]
pub struct GroupNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub config: GroupNormConfig,
}

impl_module!(GroupNorm { params: [weight, bias] });

impl Forward for GroupNorm {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.group_norm(self.config.num_groups, self.weight.as_ref(), self.bias.as_ref(), self.config.eps)?)
    }
}
