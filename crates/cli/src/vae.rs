//! The vae on the command line: the model as the trainer sees it (its output carries what its
//! loss needs), its loss per image, and `predict`'s PNG grid of reconstructions and samples.

use std::path::Path;

use liandan_nn::zoo::{Vae, VaeOutput, ZooModel, ZooSpec};
use liandan_nn::{checkpoint, impl_module, no_grad, DType, Device, Forward, ModuleExt, Result as NnResult, Tensor};

use crate::output::say;
use crate::Failure;

/// Pixels of an image the vae takes (28x28).
const PIXELS: usize = 784;
const SIDE: usize = 28;
const LATENT: usize = Vae::LATENT;

/// The zoo's [`Vae`], whose forward returns `[N, 784 + 20 + 20 + 784]`: the reconstruction,
/// the latent means and log-variances, and the input, side by side. The trainer hands a loss
/// the model's output and the labels only, and the vae's loss needs all four.
///
/// State-dict keys: the `Vae`'s (`fc1.*`, `fc21.*`, ...), so checkpoints are PyTorch's.
pub struct TrainedVae(pub Vae);

impl_module!(TrainedVae { inner: 0 });

impl TrainedVae {
    pub fn new(device: &Device) -> NnResult<TrainedVae> {
        Ok(TrainedVae(Vae::new(device)?))
    }
}

impl Forward for TrainedVae {
    fn forward_impl(&self, x: &Tensor) -> NnResult<Tensor> {
        let out = self.0.forward_full(x)?;
        let x = x.reshape(&[x.shape()[0], PIXELS])?;
        // One dtype for the concatenation, whatever autocast made of the parts.
        let parts = [&out.reconstruction, &out.mu, &out.logvar, &x].map(|t| t.to_dtype(DType::F32)).into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1)?)
    }

    /// Not a layer of its own: the `Vae` inside is what summaries and profiles show.
    fn forward(&self, x: &Tensor) -> NnResult<Tensor> {
        self.forward_impl(x)
    }
}

impl ZooModel for TrainedVae {
    fn spec(&self) -> &'static ZooSpec {
        self.0.spec()
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> NnResult<Tensor> {
        self.0.loss(x, y)
    }
}

/// [`TrainedVae`]'s output taken apart: the vae's output and the input.
fn unpack(out: &Tensor) -> NnResult<(VaeOutput, Tensor)> {
    let part = |start, len| out.narrow(1, start, len);
    let parts = VaeOutput { reconstruction: part(0, PIXELS)?, mu: part(PIXELS, LATENT)?, logvar: part(PIXELS + LATENT, LATENT)? };
    Ok((parts, part(PIXELS + 2 * LATENT, PIXELS)?))
}

/// The vae's loss per image (BCE summed over the pixels, plus KL), averaged over the batch:
/// the number pytorch/examples reports as its average loss. It sums over the batch to train;
/// the mean trains the same under Adam, whose steps do not depend on the gradient's scale.
pub fn loss(out: &Tensor) -> NnResult<Tensor> {
    let (parts, x) = unpack(out)?;
    Ok(Vae::loss_of(&parts, &x)?.div_scalar(out.shape()[0] as f64)?)
}

/// Images in a row of the grid.
const COLUMNS: usize = 8;
/// Inputs shown in the grid, at most (every input's loss is printed).
const SHOWN: usize = 64;
/// Images drawn from the prior, below the reconstructions.
const SAMPLES: usize = 16;
/// Pixels between tiles, gray so that the black backgrounds of MNIST stay apart.
const GAP: usize = 2;

/// `liandan predict --model vae`: each input's loss (BCE + KL) on stdout, and a PNG grid at
/// `out`: rows of inputs, each above its reconstruction, then images decoded from draws of
/// the prior. `outputs` is [`TrainedVae`]'s output for the inputs labelled `labels`, and
/// `weights` its trained state dict.
pub fn predict(weights: Vec<(String, Tensor)>, outputs: &Tensor, labels: &[String], device: &Device, out: &Path) -> Result<(), Failure> {
    let (parts, x) = unpack(outputs)?;
    let n = labels.len();
    let (recon, x) = (parts.reconstruction.to_vec_f64()?, x.to_vec_f64()?);
    let (mu, logvar) = (parts.mu.to_vec_f64()?, parts.logvar.to_vec_f64()?);
    for (i, label) in labels.iter().enumerate() {
        let pixels = i * PIXELS..(i + 1) * PIXELS;
        let latent = i * LATENT..(i + 1) * LATENT;
        // As PyTorch's binary cross-entropy: each log clamped at -100.
        let bce: f64 = recon[pixels.clone()].iter().zip(&x[pixels]).map(|(&r, &t)| -(t * r.ln().max(-100.0) + (1.0 - t) * (1.0 - r).ln().max(-100.0))).sum();
        let kl: f64 = mu[latent.clone()].iter().zip(&logvar[latent]).map(|(&m, &lv)| -0.5 * (1.0 + lv - m * m - lv.exp())).sum();
        say!("{label}: loss {:.2} (reconstruction {bce:.2} + KL {kl:.2})", bce + kl)?;
    }
    // A plain `Vae` with the trained weights decodes the prior's draws.
    let vae = Vae::new(device)?;
    checkpoint::load_state_dict(&vae.state_dict(), weights, true)?;
    let z = Tensor::randn(&[SAMPLES, LATENT], 0, DType::F32, device)?;
    let samples = no_grad(|| vae.decode(&z))?.to_vec_f64()?;

    let shown = n.min(SHOWN);
    let mut tiles: Vec<&[f64]> = Vec::new();
    for row in (0..shown).step_by(COLUMNS) {
        let end = (row + COLUMNS).min(shown);
        tiles.extend((row..end).map(|i| &x[i * PIXELS..(i + 1) * PIXELS]));
        tiles.extend(std::iter::repeat_n(&[][..], COLUMNS - (end - row)));
        tiles.extend((row..end).map(|i| &recon[i * PIXELS..(i + 1) * PIXELS]));
        tiles.extend(std::iter::repeat_n(&[][..], COLUMNS - (end - row)));
    }
    // A blank row sets the samples apart.
    tiles.extend(std::iter::repeat_n(&[][..], COLUMNS));
    tiles.extend(samples.chunks(PIXELS));
    write_grid(&tiles, out)?;
    let inputs = if n > shown { format!("the first {shown} of {n} inputs") } else { format!("{n} input(s)") };
    say!("{}: {inputs}, each above its reconstruction, then {SAMPLES} images decoded from draws of the prior", out.display())?;
    Ok(())
}

/// Draws 28x28 tiles of values in `[0, 1]` (an empty one is left blank) in rows of
/// [`COLUMNS`] into a grayscale PNG, written beside `out` and renamed into place.
fn write_grid(tiles: &[&[f64]], out: &Path) -> Result<(), Failure> {
    let rows = tiles.len().div_ceil(COLUMNS);
    let (width, height) = (COLUMNS * (SIDE + GAP) + GAP, rows * (SIDE + GAP) + GAP);
    let mut img = image::GrayImage::from_pixel(width as u32, height as u32, image::Luma([128]));
    for (k, tile) in tiles.iter().enumerate() {
        let (top, left) = (GAP + (k / COLUMNS) * (SIDE + GAP), GAP + (k % COLUMNS) * (SIDE + GAP));
        for (p, v) in tile.iter().enumerate() {
            let value = (v.clamp(0.0, 1.0) * 255.0).round() as u8;
            img.put_pixel((left + p % SIDE) as u32, (top + p / SIDE) as u32, image::Luma([value]));
        }
    }
    let fail = |e: String| Failure::usage(format!("cannot write {} ({e}); pass --out with a file you can write", out.display()));
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let part = out.with_file_name(format!(".{name}.part"));
    img.save_with_format(&part, image::ImageFormat::Png).map_err(|e| fail(e.to_string()))?;
    std::fs::File::open(&part).and_then(|f| f.sync_all()).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&part, out).map_err(|e| {
        let _ = std::fs::remove_file(&part);
        fail(e.to_string())
    })
}
