//! The Transformer encoder: `TransformerEncoderLayer` (post- and pre-norm) and
//! `TransformerEncoder` (`torch.nn.*`), on [`MultiheadAttention`].
//!
//! Dimension letters: N batch, L sequence length, E (`d_model`) width.

use liandan_tensor::{Device, Tensor};

use super::{with_fields, LayerNorm, LayerNormConfig, Linear, LinearConfig, MultiheadAttention, MultiheadAttentionConfig};
use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// The feed-forward activation of a [`TransformerEncoderLayer`] (PyTorch's `activation="relu"`
/// or `"gelu"`, the exact GELU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    #[default]
    Relu,
    Gelu,
}

/// Configuration of a [`TransformerEncoderLayer`] (`torch.nn.TransformerEncoderLayer(d_model,
/// nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
/// batch_first=False, norm_first=False, bias=True)`).
#[derive(Clone, Debug)]
pub struct TransformerEncoderLayerConfig {
    /// E, the embedding width.
    pub d_model: usize,
    /// H, the attention heads; must divide `d_model`.
    pub nhead: usize,
    /// The hidden width of the feed-forward block; default 2048.
    pub dim_feedforward: usize,
    /// Every dropout of the layer (attention weights, feed-forward, both residuals), in
    /// training only; default 0.1.
    pub dropout: f64,
    /// Default [`Activation::Relu`].
    pub activation: Activation,
    /// Default 1e-5.
    pub layer_norm_eps: f64,
    /// `[N, L, E]` instead of `[L, N, E]`; default false.
    pub batch_first: bool,
    /// Pre-norm (normalize before each block) instead of post-norm; default false.
    pub norm_first: bool,
    /// Biases in the linear and norm layers; default true.
    pub bias: bool,
}

with_fields!(TransformerEncoderLayerConfig {
    with_dim_feedforward: dim_feedforward: usize,
    with_dropout: dropout: f64,
    with_activation: activation: Activation,
    with_layer_norm_eps: layer_norm_eps: f64,
    with_batch_first: batch_first: bool,
    with_norm_first: norm_first: bool,
    with_bias: bias: bool,
});

impl TransformerEncoderLayerConfig {
    pub fn new(d_model: usize, nhead: usize) -> Self {
        TransformerEncoderLayerConfig {
            d_model,
            nhead,
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }

    /// A layer on `device` in training mode, each child initialized as PyTorch's.
    pub fn init(&self, device: &Device) -> Result<TransformerEncoderLayer> {
        let (d, ff) = (self.d_model, self.dim_feedforward);
        let norm = || LayerNormConfig::new(&[d]).with_eps(self.layer_norm_eps).with_bias(self.bias).init(device);
        Ok(TransformerEncoderLayer {
            self_attn: MultiheadAttentionConfig::new(d, self.nhead)
                .with_dropout(self.dropout)
                .with_bias(self.bias)
                .with_batch_first(self.batch_first)
                .init(device)?,
            linear1: LinearConfig::new(d, ff).with_bias(self.bias).init(device)?,
            linear2: LinearConfig::new(ff, d).with_bias(self.bias).init(device)?,
            norm1: norm()?,
            norm2: norm()?,
            config: self.clone(),
            training: true,
        })
    }
}

/// One transformer encoder block (`torch.nn.TransformerEncoderLayer`): self-attention and a
/// feed-forward block `linear2(dropout(act(linear1(x))))`, each with a residual and a
/// LayerNorm: post-norm `x = norm1(x + sa(x)); x = norm2(x + ff(x))`, or with `norm_first`
/// `x = x + sa(norm1(x)); x = x + ff(norm2(x))`. `sa` and `ff` end in a dropout
/// (PyTorch's `dropout1`, `dropout2`).
///
/// State-dict keys: `self_attn.in_proj_weight`, `self_attn.in_proj_bias`,
/// `self_attn.out_proj.weight`, `self_attn.out_proj.bias`, `linear1.weight`, `linear1.bias`,
/// `linear2.weight`, `linear2.bias`, `norm1.weight`, `norm1.bias`, `norm2.weight`, `norm2.bias`.
///
/// # Shapes
/// - `src`: `[L, N, E]` (`[N, L, E]` with `batch_first`) or unbatched `[L, E]`
/// - `src_mask`: `[L, L]` or `[N * H, L, L]`; `src_key_padding_mask`: `[N, L]` (bool masks
///   are `true` where attending is not allowed, float masks are added)
/// - `linear1.weight`: `[dim_feedforward, E]`, `linear2.weight`: `[E, dim_feedforward]`,
///   norms `[E]`
/// - output: the shape of `src`
#[derive(Clone, Debug)]
pub struct TransformerEncoderLayer {
    pub self_attn: MultiheadAttention,
    pub linear1: Linear,
    pub linear2: Linear,
    pub norm1: LayerNorm,
    pub norm2: LayerNorm,
    pub config: TransformerEncoderLayerConfig,
    pub training: bool,
}

impl_module!(TransformerEncoderLayer { modules: [self_attn, linear1, linear2, norm1, norm2], mode: training });

impl TransformerEncoderLayer {
    /// The layer applied to `src` with optional attention and key padding masks.
    pub fn forward_with_masks(&self, src: &Tensor, src_mask: Option<&Tensor>, src_key_padding_mask: Option<&Tensor>) -> Result<Tensor> {
        crate::summary::scope(self, || {
            let x = src;
            // Each residual add and the norm after it run as one op where the device has one.
            if self.config.norm_first {
                let (x, ff) = self.pre_norm_parts(x, &self.norm1.forward(x)?, src_mask, src_key_padding_mask)?;
                Ok(x.add(&ff)?)
            } else {
                let (x, _) = self.norm1.forward_add(x, &self.sa_block(x, src_mask, src_key_padding_mask)?)?;
                Ok(self.norm2.forward_add(&x, &self.ff_block(&x)?)?.0)
            }
        })
    }

    /// A pre-norm layer given `h = norm1(x)`: `x + sa(h)` and `ff(norm2(x + sa(h)))`, the two
    /// terms of its output.
    fn pre_norm_parts(&self, x: &Tensor, h: &Tensor, mask: Option<&Tensor>, key_padding_mask: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (h, x) = self.norm2.forward_add(x, &self.sa_block(h, mask, key_padding_mask)?)?;
        Ok((x, self.ff_block(&h)?))
    }

    fn sa_block(&self, x: &Tensor, mask: Option<&Tensor>, key_padding_mask: Option<&Tensor>) -> Result<Tensor> {
        let (out, _) = self.self_attn.forward_qkv(x, x, x, key_padding_mask, mask, false, true)?;
        Ok(out.dropout(self.config.dropout, self.training, None)?)
    }

    fn ff_block(&self, x: &Tensor) -> Result<Tensor> {
        let (p, training) = (self.config.dropout, self.training);
        // Without dropout between them, the two layers and GELU run as one op while a graph is
        // recorded (outside one, as layers, each with its summary row).
        let out = match self.config.activation {
            Activation::Gelu if !(training && p > 0.0) && liandan_tensor::is_grad_enabled() => {
                let (l1, l2) = (&self.linear1, &self.linear2);
                x.gelu_mlp(&l1.weight, l1.bias.as_ref(), &l2.weight, l2.bias.as_ref())?
            }
            Activation::Relu => self.linear2.forward(&self.linear1.forward(x)?.relu()?.dropout(p, training, None)?)?,
            Activation::Gelu => self.linear2.forward(&self.linear1.forward(x)?.gelu()?.dropout(p, training, None)?)?,
        };
        Ok(out.dropout(p, training, None)?)
    }
}

/// The layer without masks.
impl Forward for TransformerEncoderLayer {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with_masks(x, None, None)
    }
}

/// Configuration of a [`TransformerEncoder`] (`torch.nn.TransformerEncoder(encoder_layer,
/// num_layers, norm=None)`): `num_layers` layers of config `layer`, and with `norm` a final
/// `LayerNorm(d_model, eps=layer_norm_eps, bias=bias)` as `torch.nn.Transformer` builds it.
#[derive(Clone, Debug)]
pub struct TransformerEncoderConfig {
    pub layer: TransformerEncoderLayerConfig,
    pub num_layers: usize,
    /// A final LayerNorm; default false.
    pub norm: bool,
}

with_fields!(TransformerEncoderConfig { with_norm: norm: bool });

impl TransformerEncoderConfig {
    pub fn new(layer: TransformerEncoderLayerConfig, num_layers: usize) -> Self {
        TransformerEncoderConfig { layer, num_layers, norm: false }
    }

    /// An encoder on `device` in training mode. Each layer is initialized independently
    /// (PyTorch deep-copies one layer, so its layers start equal); load a checkpoint for
    /// PyTorch's exact starting point.
    pub fn init(&self, device: &Device) -> Result<TransformerEncoder> {
        let layers = (0..self.num_layers).map(|_| self.layer.init(device)).collect::<Result<Vec<_>>>()?;
        let l = &self.layer;
        let norm = if self.norm { Some(LayerNormConfig::new(&[l.d_model]).with_eps(l.layer_norm_eps).with_bias(l.bias).init(device)?) } else { None };
        Ok(TransformerEncoder { layers, norm })
    }
}

/// A stack of [`TransformerEncoderLayer`]s and an optional final LayerNorm
/// (`torch.nn.TransformerEncoder`, as with `enable_nested_tensor=False`).
///
/// State-dict keys: `layers.{i}.…` (see [`TransformerEncoderLayer`]), then `norm.weight`,
/// `norm.bias` when there is a final norm.
///
/// # Shapes
/// - `src`: `[L, N, E]` (`[N, L, E]` with `batch_first`) or unbatched `[L, E]`
/// - `mask`: `[L, L]` or `[N * H, L, L]`; `src_key_padding_mask`: `[N, L]`
/// - output: the shape of `src`
#[derive(Clone, Debug)]
pub struct TransformerEncoder {
    pub layers: Vec<TransformerEncoderLayer>,
    pub norm: Option<LayerNorm>,
}

impl_module!(TransformerEncoder { modules: [layers, norm] });

impl TransformerEncoder {
    /// Every layer applied with the same masks, then the final norm.
    pub fn forward_with_masks(&self, src: &Tensor, mask: Option<&Tensor>, src_key_padding_mask: Option<&Tensor>) -> Result<Tensor> {
        crate::summary::scope(self, || {
            // An observer (export, anomaly detection) sees each layer's ops in that layer.
            if !self.layers.is_empty() && self.layers.iter().all(|l| l.config.norm_first) && !liandan_tensor::observe::active() {
                return self.pre_norm_forward(src, mask, src_key_padding_mask);
            }
            let mut x = src.clone();
            for layer in &self.layers {
                x = layer.forward_with_masks(&x, mask, src_key_padding_mask)?;
            }
            match &self.norm {
                Some(norm) => norm.forward(&x),
                None => Ok(x),
            }
        })
    }
}

impl TransformerEncoder {
    /// Pre-norm layers, each layer's last residual add left to the next norm (the next layer's
    /// first, in that layer, or the final norm), which runs the add and itself as one op where
    /// the device has one: the values and gradients of the layers one after another.
    fn pre_norm_forward(&self, src: &Tensor, mask: Option<&Tensor>, src_key_padding_mask: Option<&Tensor>) -> Result<Tensor> {
        // The stream so far: x, and the term still to add to it.
        let (mut x, mut term) = (src.clone(), None::<Tensor>);
        for layer in &self.layers {
            (x, term) = crate::summary::scope(layer, || {
                let (h, x) = match &term {
                    Some(t) => layer.norm1.forward_add(&x, t)?,
                    None => (layer.norm1.forward(&x)?, x.clone()),
                };
                let (x, ff) = layer.pre_norm_parts(&x, &h, mask, src_key_padding_mask)?;
                Ok((x, Some(ff)))
            })?;
        }
        let term = term.expect("at least one layer");
        match &self.norm {
            Some(norm) => Ok(norm.forward_add(&x, &term)?.0),
            None => Ok(x.add(&term)?),
        }
    }
}

/// The encoder without masks.
impl Forward for TransformerEncoder {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with_masks(x, None, None)
    }
}
