//! What `train`, `eval` and `predict` share: choosing the device (and saying why), building a
//! zoo model for the data's shape, each model's defaults, opening datasets, loading
//! checkpoints, saying what a precision means on a device.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use liandan_nn::zoo::{self, Target, ZooModel, ZooSpec};
use liandan_nn::{checkpoint, impl_module, DType, DeviceKind, Forward, ModuleExt, Reduction, Tensor};
use liandan_nn::{Device, MinOps, Result as NnResult, TensorError};
use liandan_train::amp::Precision;
use liandan_train::data::{bundled_mnist_with, Dataset, Mnist, Split, Subset, Synthetic, Transformed};
use liandan_train::trainer::state;

use crate::args::DataArgs;
use crate::datasets::Pixels;
use crate::Failure;

/// The device to run on, and a sentence saying why it was chosen.
pub fn pick_device(flag: Option<&str>) -> Result<(Device, String), Failure> {
    // The message of a device error without its `device: ` prefix, which the flag's name replaces.
    let plain = |e: TensorError| match e {
        TensorError::Device(message) => message,
        other => other.to_string(),
    };
    if let Some(spec) = flag {
        let dev = Device::parse(spec).map_err(|e| Failure::usage(format!("--device: {}", plain(e))))?;
        return Ok((dev, format!("asked for with --device {spec}")));
    }
    if let Some(dev) = Device::from_env().map_err(|e| Failure::usage(plain(e)))? {
        let spec = liandan_tensor::settings::DEVICE.text_in(&liandan_tensor::settings::env).ok().flatten().unwrap_or_default();
        return Ok((dev, format!("asked for with LIANDAN_DEVICE={}", spec.trim())));
    }
    let dev = Device::best().map_err(|e| Failure::usage(e.to_string()))?;
    let why = match dev.kind() {
        DeviceKind::DiscreteGpu => "the best device found: a discrete GPU".to_string(),
        DeviceKind::IntegratedGpu => "the best device found: an integrated GPU (no discrete one)".to_string(),
        DeviceKind::Cpu => {
            let software = Device::gpus().iter().any(|d| d.kind() == DeviceKind::SoftwareGpu);
            let note = if software { " (a software Vulkan adapter exists; --device gpu would use it, slower than the CPU)" } else { "" };
            format!("NO GPU FOUND, falling back to the CPU{note}")
        }
        other => format!("the best device found ({other:?})"),
    };
    Ok((dev, why))
}

/// A zoo model whose input is reshaped to the model's own per-sample shape (the LSTM reads
/// an MNIST image `[1, 28, 28]` as 28 steps of 28). The vae's output carries what its loss
/// needs ([`crate::vae::TrainedVae`]).
pub struct ZooNet {
    pub inner: Box<dyn ZooModel>,
    sample_shape: Vec<usize>,
}

impl_module!(ZooNet { inner: inner });

impl ZooNet {
    /// `inner`, fed samples of its own shape.
    pub fn new(inner: Box<dyn ZooModel>) -> ZooNet {
        let sample_shape = inner.sample_shape();
        ZooNet { inner, sample_shape }
    }
}

impl Forward for ZooNet {
    fn forward_impl(&self, x: &Tensor) -> NnResult<Tensor> {
        let mut shape = vec![x.shape()[0]];
        shape.extend_from_slice(&self.sample_shape);
        self.inner.forward(&x.reshape(&shape)?)
    }

    /// A wrapper, not a layer: the zoo model inside is the model summaries and profiles see.
    fn forward(&self, x: &Tensor) -> NnResult<Tensor> {
        self.forward_impl(x)
    }
}

/// Whether the model predicts classes (every zoo model but the vae).
pub fn classifies(spec: &ZooSpec) -> bool {
    matches!(spec.target, Target::Classes(_))
}

/// The dataset `--data` names, else the model's ([`default_data`]).
pub fn dataset<'a>(args: &'a DataArgs, spec: &ZooSpec) -> &'a str {
    args.data.as_deref().unwrap_or(default_data(spec))
}

/// The data `train` and `eval` use when `--data` is not given: CIFAR-10 for the models of
/// 32x32 RGB images, the bundled MNIST for the others.
pub fn default_data(spec: &ZooSpec) -> &'static str {
    match spec.name {
        "resnet18" | "vit" => "cifar10",
        _ => "bundled",
    }
}

/// Epochs when `--epochs` is not given: three are enough for mnist_cnn to pass 97% on the
/// bundled set; the vae trains for pytorch/examples' ten.
pub fn default_epochs(spec: &ZooSpec) -> usize {
    match spec.target {
        Target::Reconstruction => 10,
        Target::Classes(_) => 3,
    }
}

/// What early stopping and `best.safetensors` follow when `--monitor` is not given.
pub fn default_monitor(spec: &ZooSpec) -> &'static str {
    if classifies(spec) {
        "val_acc"
    } else {
        "val_loss"
    }
}

/// The sample shape of the datasets `--data` names, known before anything is downloaded.
fn known_shape(data: &str) -> Option<&'static [usize]> {
    match data {
        "bundled" | "mnist" | "fashion-mnist" => Some(&[1, 28, 28]),
        "cifar10" => Some(&[3, 32, 32]),
        _ => None,
    }
}

/// Refuses, before any download, a named dataset whose samples the model cannot take.
pub fn check_fits(spec: &ZooSpec, data: &str) -> Result<(), Failure> {
    match known_shape(data) {
        Some(shape) => fits(spec, shape),
        None => Ok(()),
    }
}

/// Whether model `spec` takes samples of `sample_shape`: `mlp` any, the others as many values
/// as their own samples have.
fn takes(spec: &ZooSpec, sample_shape: &[usize]) -> bool {
    spec.name == "mlp" || spec.input_shape[1..].iter().product::<usize>() == sample_shape.iter().product::<usize>()
}

/// An error naming the models that do fit, where `spec` cannot take samples of `sample_shape`.
fn fits(spec: &ZooSpec, sample_shape: &[usize]) -> Result<(), Failure> {
    if takes(spec, sample_shape) {
        return Ok(());
    }
    let fitting: Vec<&str> = zoo::SPECS.iter().filter(|s| takes(s, sample_shape)).map(|s| s.name).collect();
    Err(Failure::usage(format!(
        "`{}` takes samples of shape {:?} but the data has {sample_shape:?}; pick a model for this data ({}) or other data",
        spec.name,
        &spec.input_shape[1..],
        fitting.join(", ")
    )))
}

/// Builds model `spec` on `device` for samples of `sample_shape`, seeded by `seed`.
pub fn build_model(spec: &ZooSpec, sample_shape: &[usize], device: &Device, seed: u64) -> Result<ZooNet, Failure> {
    fits(spec, sample_shape)?;
    liandan_nn::manual_seed(seed);
    let inner: Box<dyn ZooModel> = match spec.target {
        Target::Reconstruction => Box::new(crate::vae::TrainedVae::new(device)?),
        Target::Classes(_) => zoo::build_for(spec.name, sample_shape, device)?,
    };
    Ok(ZooNet::new(inner))
}

/// The loss the zoo model trains with, on its outputs, averaged over the batch: NLL for models
/// ending in LogSoftmax, cross-entropy for the other classifiers, BCE + KL per image for the vae.
pub fn loss_for(spec: &ZooSpec) -> impl Fn(&Tensor, &Tensor) -> liandan_train::Result<Tensor> + Send + 'static {
    let (nll, vae) = (spec.loss == "NLL", !classifies(spec));
    move |out, y| {
        Ok(if vae {
            crate::vae::loss(out)?
        } else if nll {
            out.nll_loss(y, Reduction::Mean)?
        } else {
            out.cross_entropy(y, Reduction::Mean)?
        })
    }
}

/// Class probabilities from the model's outputs (log-probabilities for NLL models).
pub fn probabilities(spec: &ZooSpec, out: &Tensor) -> Result<Tensor, Failure> {
    Ok(if spec.loss == "NLL" { out.exp()? } else { out.softmax(1usize)? })
}

/// The bundled set, described where it is named: where its images come from.
pub const BUNDLED: &str = "bundled MNIST (MNIST's 10,000 test images, 8,000 train / 2,000 held out for validation)";

/// A part of a dataset: what `train` fits on, what it validates on, or (`eval --split test`) a
/// test split. `val` of a dataset with train and test splits is its test split, which is what
/// `train` validates on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Train,
    Val,
    Test,
}

/// Training and validation datasets for `--data`, their pixels as `pixels` says, cut to `max`
/// samples each, and a line saying what they are.
#[allow(clippy::type_complexity)] // spelled out: the two datasets and the description
pub fn open_data(data: &str, max: Option<usize>, pixels: Pixels) -> Result<(Arc<dyn Dataset>, Arc<dyn Dataset>, String), Failure> {
    let (train, what) = open_part(data, Part::Train, max, pixels)?;
    let (val, _) = open_part(data, Part::Val, max, pixels)?;
    Ok((train, val, what))
}

/// One part of `--data`, cut to `max` samples, its pixels as `pixels` says, and a line saying
/// what the data is. Only that part's files are read, or downloaded.
pub fn open_part(data: &str, part: Part, max: Option<usize>, pixels: Pixels) -> Result<(Arc<dyn Dataset>, String), Failure> {
    let split = match part {
        Part::Train => Split::Train,
        Part::Val | Part::Test => Split::Test,
    };
    let (set, what): (Arc<dyn Dataset>, String) = match data {
        "bundled" => {
            let (t, v) = bundled_mnist_with(pixels.transforms(1))?;
            let set: Arc<dyn Dataset> = match part {
                Part::Train => Arc::new(t),
                Part::Val => Arc::new(v),
                Part::Test => {
                    return Err(Failure::usage(
                        "the bundled set has no test split (its 10,000 images are MNIST's test split, 8,000 of them for training): \
                         evaluate on --split val (the 2,000 held out), or on another --data",
                    ))
                }
            };
            (set, BUNDLED.into())
        }
        "mnist" | "fashion-mnist" => crate::datasets::mnist_like(data, split, pixels)?,
        "cifar10" => crate::datasets::cifar(split, pixels)?,
        dir if Path::new(dir).is_dir() => {
            let set = Transformed::new(Arc::new(Mnist::load(Path::new(dir), split)?), pixels.transforms(1))?;
            (Arc::new(set), format!("IDX files in {dir}"))
        }
        other => {
            return Err(Failure::usage(format!("unknown dataset `{other}`: use bundled, mnist, fashion-mnist, cifar10 or an existing directory of IDX files")))
        }
    };
    match max {
        Some(n) if n < set.len() => Ok((Arc::new(Subset::new(set, (0..n).collect())?), what)),
        _ => Ok((set, what)),
    }
}

/// `--data synthetic`: seeded random samples of `spec`'s input shape and classes, as many as
/// CIFAR-10 has (50,000 to train on, 10,000 to validate), cut to `max` each: for timing a model
/// where its dataset is not at hand. There is nothing to learn in them.
#[allow(clippy::type_complexity)] // as `open_data`
pub fn synthetic_data(spec: &ZooSpec, max: Option<usize>) -> Result<(Arc<dyn Dataset>, Arc<dyn Dataset>, String), Failure> {
    let Target::Classes(classes) = spec.target else { return Err(Failure::usage(format!("`{}` is not a classifier", spec.name))) };
    let shape = &spec.input_shape[1..];
    let (n, m) = (max.unwrap_or(50_000).min(50_000), max.unwrap_or(10_000).min(10_000));
    let what = format!("synthetic: seeded random samples of shape {shape:?} in {classes} classes (for timing: there is nothing to learn)");
    Ok((Arc::new(Synthetic::new(n, shape, classes, 1)?), Arc::new(Synthetic::new(m, shape, classes, 2)?), what))
}

/// Loads a state dict into `model`, strictly: ours (`best.safetensors`, or the `model.`
/// tensors of a `last.safetensors`) or one PyTorch saved with `save_file(model.state_dict())`.
/// Returns the settings `train` kept in it (model, data, ...; empty for other files).
pub fn load_weights(model: &ZooNet, path: &Path, device: &Device) -> Result<BTreeMap<String, String>, Failure> {
    if !path.is_file() {
        return Err(Failure::usage(format!(
            "{}: no such checkpoint file; give the best.safetensors that train wrote, or a PyTorch state dict saved with safetensors",
            path.display()
        )));
    }
    let (mut tensors, metadata): (_, HashMap<String, String>) = checkpoint::load_with_metadata(path, device)?;
    if tensors.iter().all(|(n, _)| n.starts_with("model.") || n.starts_with("optimizer.")) && tensors.iter().any(|(n, _)| n.starts_with("optimizer.")) {
        // A training state: keep the model's part.
        tensors = tensors.into_iter().filter_map(|(n, t)| n.strip_prefix("model.").map(|n| (n.to_string(), t))).collect();
    }
    let settings = state::settings(&metadata);
    checkpoint::load_state_dict(&model.state_dict(), tensors, true).map_err(|e| {
        let trained = settings.get("model").map(|m| format!(" (it was trained as `{m}`)")).unwrap_or_default();
        let detail = state::describe_mismatch(&e).unwrap_or_else(|| e.to_string());
        Failure::usage(format!("{} does not fit `{}`{trained}; is it a checkpoint of another model? {detail}", path.display(), model.inner.spec().name))
    })?;
    Ok(settings)
}

/// What `--precision` means on `device`, in one line: the policy, and how many bytes the
/// device spends on a value of the low type (measured, since a backend may hold a 16-bit type
/// in 32-bit words, which saves no memory).
/// `min_ops`: the run's `--autocast-min-ops` (`None`: the precision's own minimums).
pub fn precision_note(device: &Device, precision: Precision, min_ops: Option<u64>) -> String {
    if precision == Precision::F32 {
        return "f32".into();
    }
    let scaler = if precision == Precision::F16 {
        "; the loss scaled dynamically (from 2^16) in a step that computes in f16, a step that overflows skipped"
    } else {
        ""
    };
    let ops = |n: u64| match n {
        n if n.is_power_of_two() => format!("2^{}", n.trailing_zeros()),
        n => format!("2^{:.1}", (n as f64).log2()),
    };
    let min = min_ops.map_or(precision.min_ops(), MinOps::all);
    let products = match (min.matmul, min.conv) {
        (0, 0) => "matmul and convolutions".to_string(),
        (m, c) if m == c => format!("matmul and convolutions from {} operations", ops(m)),
        (m, c) => format!("matmul and linear layers from {} operations and convolutions from {}", ops(m), ops(c)),
    };
    let mut note = format!(
        "{precision} mixed precision: {products} in {precision}; reductions, softmax, normalizations, losses, weights and optimizer state in f32{scaler}"
    );
    match bytes_per_value(device, precision.dtype()) {
        Some(2) if device.is_cpu() => note.push_str(&format!("; the CPU stores {precision} in 2 bytes and computes through f32")),
        Some(2) => note.push_str(&format!("; {device} stores {precision} in 2 bytes")),
        Some(b) => note.push_str(&format!("; {device} holds each {precision} value in {b} bytes (rounded to {precision}), so it saves no memory there")),
        None => {}
    }
    note
}

/// Bytes `device` holds per value of `dtype`, from its memory statistics around a fresh tensor.
fn bytes_per_value(device: &Device, dtype: DType) -> Option<u64> {
    const N: usize = 1 << 16;
    device.synchronize().ok()?;
    let before = device.memory_stats()?.in_use;
    let t = Tensor::zeros(&[N], dtype, device).ok()?;
    device.synchronize().ok()?;
    let after = device.memory_stats()?.in_use;
    drop(t);
    Some(after.checked_sub(before)? / N as u64).filter(|b| *b > 0)
}
