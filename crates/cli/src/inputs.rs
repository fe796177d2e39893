//! `liandan predict`: images from PNG, JPEG, `.npy` or IDX files through a trained model:
//! the predicted class and its probability per image, or for the vae each image's loss and a
//! PNG grid of reconstructions and samples.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use liandan_nn::zoo::{self, ZooSpec};
use liandan_nn::{checkpoint, Device, ModuleExt};
use liandan_train::data::{DataLoader, TensorDataset, Transformed};
use liandan_train::trainer::predict as run_model;

use crate::args::PredictArgs;
use crate::common::{build_model, classifies, load_weights, pick_device, probabilities};
use crate::datasets::Pixels;
use crate::images::{self, Shape};
use crate::output::{note, say};
use crate::Failure;

/// Where the vae's grid goes unless `--out` says.
const VAE_GRID: &str = "vae-predict.png";

pub fn predict(a: &PredictArgs) -> Result<(), Failure> {
    let spec = zoo::spec(&a.model)?;
    if let (Some(info), _) = crate::own_data::checkpoint_info(&a.checkpoint)? {
        return crate::own_data::predict(a, spec, &info);
    }
    let (device, why) = pick_device(a.device.as_deref())?;
    // On stderr: stdout is the predictions, a line per image.
    note!("device: {device} ({why})");
    let grid = match (&a.out, classifies(spec)) {
        (None, true) => None,
        (Some(_), true) => return Err(Failure::usage(format!("--out is where the vae's grid goes; `{}` prints its predictions", spec.name))),
        (Some(out), false) => Some(out.clone()),
        (None, false) if Path::new(VAE_GRID).exists() => {
            return Err(Failure::usage(format!("{VAE_GRID} exists and is left alone; pass --out FILE for the grid (a file named by --out is replaced)")))
        }
        (None, false) => Some(PathBuf::from(VAE_GRID)),
    };
    let want = model_input(spec, &a.checkpoint)?;
    let (images, changes) = images::read_all(&a.input, want)?;
    images::report(&changes, spec.name, want);
    if images.is_empty() {
        return Err(Failure::usage(format!("{}: no images found; predict reads PNG, JPEG, .npy and IDX files", a.input.display())));
    }
    let sample = [want.channels, want.height, want.width];
    let n = images.len();
    let pixels: Vec<f32> = images.iter().flat_map(|i| i.values.iter().copied()).collect();
    let data = Transformed::new(Arc::new(TensorDataset::from_vecs(pixels, vec![0; n], &sample)?), Pixels::of(spec).transforms(want.channels))?;
    let mut model = build_model(spec, &sample, &device, 0)?;
    load_weights(&model, &a.checkpoint, &device)?;
    let loader = DataLoader::new(data, 256, &device)?;
    let outputs = run_model(&mut model, &loader)?;
    let labels: Vec<String> = images.into_iter().map(|i| i.label).collect();
    if let Some(grid) = grid {
        return crate::vae::predict(model.state_dict(), &outputs, &labels, &device, &grid);
    }
    let probs = probabilities(spec, &outputs)?;
    let classes = probs.shape()[1];
    let probs = probs.to_vec_f64()?;
    for (i, label) in labels.iter().enumerate() {
        let row = &probs[i * classes..(i + 1) * classes];
        let (class, p) = row.iter().enumerate().fold((0, f64::NEG_INFINITY), |best, (c, &p)| if p > best.1 { (c, p) } else { best });
        say!("{label}: class {class} (p = {p:.4})")?;
    }
    Ok(())
}

/// The image the model takes: its sample shape as an image (the lstm's `[28, 28]` and the
/// vae's `[784]` are 1x28x28). An `mlp` takes what it was trained on, which its checkpoint's
/// first layer tells: 784 values are 1x28x28, 3,072 are 3x32x32.
fn model_input(spec: &ZooSpec, checkpoint: &Path) -> Result<Shape, Failure> {
    let sample = match mlp_inputs(spec, checkpoint) {
        Some(n) => vec![n],
        None => spec.input_shape[1..].to_vec(),
    };
    let shape = match sample[..] {
        [channels, height, width] => Some(Shape { channels, height, width }),
        [height, width] => Some(Shape { channels: 1, height, width }),
        [n] => square(n)
            .map(|s| Shape { channels: 1, height: s, width: s })
            .or_else(|| square(n / 3).filter(|_| n % 3 == 0).map(|s| Shape { channels: 3, height: s, width: s })),
        _ => None,
    };
    shape.ok_or_else(|| Failure::usage(format!("`{}` takes samples of shape {sample:?}, which are not images predict can make", spec.name)))
}

/// The inputs of an `mlp` checkpoint's first layer; `None` for other models, or a checkpoint
/// that does not read (loading it says why).
fn mlp_inputs(spec: &ZooSpec, path: &Path) -> Option<usize> {
    if spec.name != "mlp" {
        return None;
    }
    let tensors = checkpoint::load(path, &Device::cpu()).ok()?;
    let (_, weight) = tensors.iter().find(|(n, _)| n == "fc1.weight" || n == "model.fc1.weight")?;
    weight.shape().get(1).copied()
}

/// The side of a square of `n` pixels.
fn square(n: usize) -> Option<usize> {
    let s = (n as f64).sqrt().round() as usize;
    (s > 0 && s * s == n).then_some(s)
}
