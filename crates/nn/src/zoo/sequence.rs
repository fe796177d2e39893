//! The zoo's sequence models: the CIFAR `vit` (a Transformer encoder over image patches) and
//! the row-by-row MNIST `lstm`.

use liandan_tensor::{DType, Device, Tensor};

use super::{class_loss, spec_of, ZooModel, ZooSpec};
use crate::error::Result;
use crate::impl_module;
use crate::layers::{
    Activation, Conv2d, Conv2dConfig, LSTMConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, TransformerEncoder, TransformerEncoderConfig,
    TransformerEncoderLayerConfig, LSTM,
};
use crate::module::Forward;

/// `vit`: a ViT-Tiny-like Vision Transformer for 32x32 images (2,693,578 parameters): 4x4
/// patches embedded by a strided convolution into 192 dimensions, a class token and learned
/// positions for the 65 tokens, 6 pre-norm encoder layers (3 heads, MLP 768, GELU, no
/// dropout), a final LayerNorm and a linear head on the class token.
///
/// State-dict keys: `cls`, `pos`, `patch.*`, `enc.layers.{0..6}.*`, `norm.*`, `head.*` (a
/// module's own parameters come before its children's, as in PyTorch).
///
/// # Shapes
/// - input: `[N, 3, 32, 32]`
/// - output: `[N, 10]` logits (`[N, classes]` from [`Vit::with_classes`])
pub struct Vit {
    /// `[1, 1, 192]`, the class token (initialized to zeros, as the reference).
    pub cls: Tensor,
    /// `[1, 65, 192]`, the learned positions (zeros at first).
    pub pos: Tensor,
    pub patch: Conv2d,
    pub enc: TransformerEncoder,
    pub norm: LayerNorm,
    pub head: Linear,
}

impl_module!(Vit { params: [cls, pos], modules: [patch, enc, norm, head] });

impl Vit {
    pub const DIM: usize = 192;
    pub const TOKENS: usize = 65;

    pub fn new(device: &Device) -> Result<Vit> {
        Vit::with_classes(10, device)
    }

    /// The same network with a head of `classes` outputs.
    pub fn with_classes(classes: usize, device: &Device) -> Result<Vit> {
        let dim = Self::DIM;
        let zeros = |shape: &[usize]| -> Result<Tensor> { Ok(Tensor::zeros(shape, DType::F32, device)?.requires_grad_(true)?) };
        let layer = TransformerEncoderLayerConfig::new(dim, 3)
            .with_dim_feedforward(768)
            .with_dropout(0.0)
            .with_activation(Activation::Gelu)
            .with_batch_first(true)
            .with_norm_first(true);
        Ok(Vit {
            cls: zeros(&[1, 1, dim])?,
            pos: zeros(&[1, Self::TOKENS, dim])?,
            patch: Conv2dConfig::new(3, dim, 4).with_stride((4, 4)).init(device)?,
            enc: TransformerEncoderConfig::new(layer, 6).init(device)?,
            norm: LayerNormConfig::new(&[dim]).init(device)?,
            head: LinearConfig::new(dim, classes).init(device)?,
        })
    }
}

impl Forward for Vit {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let n = x.shape().first().copied().unwrap_or(0);
        // [N, 192, 8, 8] -> [N, 64, 192]: one token per patch.
        let tokens = self.patch.forward(x)?.flatten(2, -1)?.transpose(1, 2)?;
        let cls = self.cls.expand(&[n, 1, Self::DIM])?;
        let h = Tensor::cat(&[&cls, &tokens], 1)?.add(&self.pos)?;
        let h = self.norm.forward(&self.enc.forward(&h)?)?;
        self.head.forward(&h.select(1, 0)?)
    }
}

impl ZooModel for Vit {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("vit")
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor> {
        class_loss(self.forward(x)?, y, "vit")
    }
}

/// `lstm`: reads an MNIST image row by row (28 steps of 28 pixels) with a one-layer,
/// batch-first LSTM of 256 units and classifies from the last step's output (295,434
/// parameters).
///
/// State-dict keys: `lstm.weight_ih_l0`, `lstm.weight_hh_l0`, `lstm.bias_ih_l0`,
/// `lstm.bias_hh_l0`, `fc.*`.
///
/// # Shapes
/// - input: `[N, 28, 28]` or `[N, 1, 28, 28]`
/// - output: `[N, 10]` logits (`[N, classes]` from [`LstmNet::with_classes`])
pub struct LstmNet {
    pub lstm: LSTM,
    pub fc: Linear,
}

impl_module!(LstmNet { lstm, fc });

impl LstmNet {
    pub fn new(device: &Device) -> Result<LstmNet> {
        LstmNet::with_classes(10, device)
    }

    /// The same network with a head of `classes` outputs.
    pub fn with_classes(classes: usize, device: &Device) -> Result<LstmNet> {
        Ok(LstmNet { lstm: LSTMConfig::new(28, 256).with_batch_first(true).init(device)?, fc: LinearConfig::new(256, classes).init(device)? })
    }
}

impl Forward for LstmNet {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let n = x.shape().first().copied().unwrap_or(0);
        let (out, _) = self.lstm.forward_with_state(&x.reshape(&[n, 28, 28])?, None)?;
        self.fc.forward(&out.select(1, 27)?)
    }
}

impl ZooModel for LstmNet {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("lstm")
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor> {
        class_loss(self.forward(x)?, y, "lstm")
    }
}
