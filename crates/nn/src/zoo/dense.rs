//! The zoo's fully connected models: `mlp` and the `vae` of pytorch/examples.

use liandan_tensor::{Device, Reduction, Tensor};

use super::{class_loss, spec_of, ZooModel, ZooSpec};
use crate::error::Result;
use crate::impl_module;
use crate::layers::{Linear, LinearConfig};
use crate::module::Forward;
use crate::summary::{self, LayerOutput};

/// `mlp`: Linear 1024-512, ReLU, Linear 512-256, ReLU, Linear 256-10 (658,698 parameters), as
/// the reference benchmarks it; [`Mlp::with_inputs`] sizes the first layer for other data
/// (784 for MNIST, 3,072 for CIFAR-10).
///
/// State-dict keys: `fc1.*`, `fc2.*`, `fc3.*` (each `weight`, `bias`).
///
/// # Shapes
/// - input: `[N, inputs]`, or anything with `inputs` values per sample (`[N, 1, 28, 28]`),
///   flattened as `nn.Flatten` would
/// - output: `[N, 10]` logits (`[N, classes]` from [`Mlp::with_sizes`])
pub struct Mlp {
    pub fc1: Linear,
    pub fc2: Linear,
    pub fc3: Linear,
}

impl_module!(Mlp { fc1, fc2, fc3 });

impl Mlp {
    /// Inputs per sample of the reference network.
    pub const INPUTS: usize = 1024;

    /// The reference network: 1,024 inputs.
    pub fn new(device: &Device) -> Result<Mlp> {
        Mlp::with_inputs(Self::INPUTS, device)
    }

    /// The network for samples of `inputs` values.
    pub fn with_inputs(inputs: usize, device: &Device) -> Result<Mlp> {
        Mlp::with_sizes(inputs, 10, device)
    }

    /// The same hidden layers between `inputs` values per sample (a table's columns) and
    /// `classes` outputs.
    pub fn with_sizes(inputs: usize, classes: usize, device: &Device) -> Result<Mlp> {
        Ok(Mlp {
            fc1: LinearConfig::new(inputs, 512).init(device)?,
            fc2: LinearConfig::new(512, 256).init(device)?,
            fc3: LinearConfig::new(256, classes).init(device)?,
        })
    }
}

impl Forward for Mlp {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let x = if x.rank() > 2 { x.flatten(1, -1)? } else { x.clone() };
        let h = self.fc1.forward(&x)?.relu()?;
        self.fc3.forward(&self.fc2.forward(&h)?.relu()?)
    }
}

impl ZooModel for Mlp {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("mlp")
    }

    fn sample_shape(&self) -> Vec<usize> {
        vec![self.fc1.weight.shape()[1]]
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor> {
        class_loss(self.forward(x)?, y, "mlp")
    }
}

/// `vae`: the variational auto-encoder of pytorch/examples (652,824 parameters). The encoder
/// maps a 784-pixel image through 400 hidden units to the mean and log-variance of a
/// 20-dimensional latent; the decoder maps a latent sample back through 400 units to 784
/// pixel probabilities.
///
/// State-dict keys: `fc1.*`, `fc21.*` (mean), `fc22.*` (log-variance), `fc3.*`, `fc4.*`.
///
/// # Shapes
/// - input: `[N, 784]` or anything with 784 elements per sample (`[N, 1, 28, 28]`), in `[0, 1]`
/// - output of [`Forward`]: `[N, 784]` reconstruction probabilities
pub struct Vae {
    pub fc1: Linear,
    pub fc21: Linear,
    pub fc22: Linear,
    pub fc3: Linear,
    pub fc4: Linear,
}

impl_module!(Vae { fc1, fc21, fc22, fc3, fc4 });

/// What the VAE's forward pass produces.
pub struct VaeOutput {
    /// `[N, 784]` pixel probabilities.
    pub reconstruction: Tensor,
    /// `[N, 20]` latent means.
    pub mu: Tensor,
    /// `[N, 20]` latent log-variances.
    pub logvar: Tensor,
}

impl LayerOutput for VaeOutput {
    fn first_tensor(&self) -> &Tensor {
        &self.reconstruction
    }
}

impl Vae {
    pub fn new(device: &Device) -> Result<Vae> {
        Ok(Vae {
            fc1: LinearConfig::new(784, 400).init(device)?,
            fc21: LinearConfig::new(400, 20).init(device)?,
            fc22: LinearConfig::new(400, 20).init(device)?,
            fc3: LinearConfig::new(20, 400).init(device)?,
            fc4: LinearConfig::new(400, 784).init(device)?,
        })
    }

    /// Dimensions of the latent space.
    pub const LATENT: usize = 20;

    /// The encoder: the latent means and log-variances `[N, 20]` of images `x` (`[N, 784]`,
    /// or anything with 784 values per sample).
    pub fn encode(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let n = x.shape().first().copied().unwrap_or(0);
        let h = self.fc1.forward(&x.reshape(&[n, x.numel() / n.max(1)])?)?.relu()?;
        Ok((self.fc21.forward(&h)?, self.fc22.forward(&h)?))
    }

    /// The decoder: pixel probabilities `[N, 784]` of latents `z` (`[N, 20]`). Decoding
    /// standard normal draws samples new images from the prior.
    pub fn decode(&self, z: &Tensor) -> Result<Tensor> {
        Ok(self.fc4.forward(&self.fc3.forward(z)?.relu()?)?.sigmoid()?)
    }

    /// The forward pass with the reparameterization noise given: `z = mu + noise * exp(logvar / 2)`.
    /// `noise` is `[N, 20]`, normally standard normal draws.
    pub fn forward_with_noise(&self, x: &Tensor, noise: &Tensor) -> Result<VaeOutput> {
        self.forward_drawing(x, |_| Ok(noise.clone()))
    }

    /// The forward pass with fresh standard normal noise (`torch.randn_like(mu)`).
    pub fn forward_full(&self, x: &Tensor) -> Result<VaeOutput> {
        // Drawn in mu's type: under autocast an f32 draw would widen mu and the noise's scale
        // for the sum and narrow z again for the decoder, six casts a step with backward's.
        self.forward_drawing(x, |mu| Ok(Tensor::randn(mu.shape(), liandan_tensor::rng::next_seed(), mu.dtype(), mu.device())?))
    }

    /// The forward pass with the noise `noise(mu)` gives.
    fn forward_drawing(&self, x: &Tensor, noise: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<VaeOutput> {
        // A forward of its own, so it runs as the model (summaries, profiles), as `forward` does.
        summary::scope(self, || {
            let (mu, logvar) = self.encode(x)?;
            let z = mu.add(&noise(&mu)?.mul(&logvar.mul_scalar(0.5)?.exp()?)?)?;
            Ok(VaeOutput { reconstruction: self.decode(&z)?, mu, logvar })
        })
    }

    /// The reference's loss: binary cross-entropy of the reconstruction against `x`, summed,
    /// plus the KL divergence of the latent from the standard normal,
    /// `-0.5 * sum(1 + logvar - mu^2 - exp(logvar))`. Stays finite where pixels are exactly 0
    /// or 1 (the log is clamped at -100, as PyTorch's).
    pub fn loss_of(out: &VaeOutput, x: &Tensor) -> Result<Tensor> {
        let target = x.reshape(out.reconstruction.shape())?;
        let bce = out.reconstruction.bce_loss(&target, Reduction::Sum)?;
        let kl_terms = out.logvar.add_scalar(1.0)?.sub(&out.mu.square()?)?.sub(&out.logvar.exp()?)?;
        Ok(bce.sub(&kl_terms.sum_all()?.mul_scalar(0.5)?)?)
    }
}

impl Forward for Vae {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_full(x)?.reconstruction)
    }
}

impl ZooModel for Vae {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("vae")
    }

    fn loss(&self, x: &Tensor, _y: Option<&Tensor>) -> Result<Tensor> {
        Vae::loss_of(&self.forward_full(x)?, x)
    }
}
