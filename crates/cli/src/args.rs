//! The command line's grammar (`clap` derive): every subcommand and option, with `--help`.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use liandan_train::amp::Precision;
use liandan_train::trainer::TensorBoardConfig;

#[derive(Parser)]
#[command(name = "liandan", version, about = "Train neural networks on the GPU you have (Metal, Vulkan, DX12) or the CPU.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List the devices liandan can use and the one it would pick.
    Info,
    /// List the zoo's models: inputs, losses, and the optimizer, batch size, epochs and data
    /// that `train` uses for each unless told otherwise.
    Zoo,
    /// Print a zoo model's layers, output shapes and parameter counts.
    Summary(SummaryArgs),
    /// Train a zoo model (default: mnist_cnn on the bundled MNIST, on the best device).
    /// Boxed: its many flags would make every command as large.
    Train(Box<TrainArgs>),
    /// Loss and accuracy of a checkpoint on a dataset (the vae: its loss).
    Eval(EvalArgs),
    /// Predicted class and probability for images (PNG, JPEG, .npy or IDX); the vae draws its
    /// reconstructions and samples into a PNG grid.
    Predict(PredictArgs),
    /// Redraw the plot of a training history (history.json or history.csv).
    Plot(PlotArgs),
    /// Time a zoo model's training steps (forward, backward, its optimizer) per op and per layer.
    Profile(ProfileArgs),
    /// The largest batch whose training step fits in the device's memory (or in --budget).
    FindBatchSize(FindBatchSizeArgs),
    /// Write a zoo model with its checkpoint's weights as an ONNX file (ONNX Runtime, TensorRT, ...).
    Export(ExportArgs),
}

#[derive(Args)]
pub struct SummaryArgs {
    /// The model (`liandan zoo` lists them).
    pub model: String,
    /// The batch size of the input the table is computed for.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub batch: Option<String>,
}

/// Where data comes from, for `train` and `eval`.
#[derive(Args, Clone)]
pub struct DataArgs {
    /// `bundled` (built in: MNIST's 10,000 test images, 8,000 to train on and 2,000 held out
    /// for validation, the same 2,000 every run; so a model trained on it has seen most of
    /// MNIST's test split), `mnist`, `fashion-mnist` or `cifar10` (the full sets, downloaded on
    /// first use into $LIANDAN_DATA, default ~/.cache/liandan; LIANDAN_DATA_URL replaces the
    /// download's base URL), a directory holding MNIST-format IDX files (train-* and t10k-*),
    /// a folder of PNG or JPEG images with one subfolder per class (or train/ and val/ laid out
    /// so; else 20% held out to validate), or a CSV table with --target.
    /// Default: the model's (`liandan zoo`): cifar10 for resnet18 and vit, bundled for the others.
    /// `train` also takes `synthetic`: seeded random samples of the model's input shape, for
    /// timing.
    #[arg(long, value_name = "NAME|DIR|CSV")]
    pub data: Option<String>,
    #[command(flatten)]
    pub own: OwnDataArgs,
    /// cpu, gpu or gpu:N (default: LIANDAN_DEVICE, else a hardware GPU, else the CPU).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// Use at most this many samples of each split (quick trials and tests).
    #[arg(long, value_name = "N", value_parser = positive, hide = true)]
    pub max_samples: Option<usize>,
}

#[derive(Args)]
pub struct TrainArgs {
    /// The zoo model to train.
    #[arg(long, default_value = "mnist_cnn")]
    pub model: String,
    #[command(flatten)]
    pub data: DataArgs,
    /// Epochs to train (default: the model's, `liandan zoo`).
    #[arg(long, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub epochs: Option<usize>,
    /// Samples per batch (default: the model's, from docs/MODEL_ZOO.md).
    #[arg(long, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub batch_size: Option<usize>,
    /// Learning rate (default: the model's).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub lr: Option<f64>,
    /// sgd, adam, adamw, adadelta, rmsprop or adagrad (default: the model's).
    #[arg(long, value_name = "NAME")]
    pub optimizer: Option<String>,
    /// none, step[:GAMMA] (StepLR every epoch), exponential:GAMMA or cosine (default: the
    /// model's; mnist_cnn uses step:0.7).
    #[arg(long, value_name = "SPEC")]
    pub scheduler: Option<String>,
    /// Where checkpoints, history and plot go (default: runs/<model>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Stop after this many epochs without improvement of --monitor.
    #[arg(long, value_name = "N", value_parser = positive)]
    pub patience: Option<usize>,
    /// What early stopping and best.safetensors follow: val_loss, val_acc, loss, acc (default:
    /// val_acc; val_loss for the vae, which has no accuracy).
    #[arg(long, value_name = "METRIC")]
    pub monitor: Option<String>,
    /// Continue the run in --out from its last.safetensors, with the model, data, batch size,
    /// optimizer, scheduler, precision and seed it was started with; of these flags only ones
    /// that agree may be given. --epochs and --patience may change.
    #[arg(long, conflicts_with = "overwrite")]
    pub resume: bool,
    /// Start afresh in an --out that already holds a run, replacing its checkpoints and history.
    #[arg(long)]
    pub overwrite: bool,
    /// Print the model's layers, output shapes and parameter counts before training.
    #[arg(long)]
    pub summary: bool,
    /// Seed of the initial weights, the shuffle and dropout.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Train on at most N batches per epoch (quick trials and tests).
    #[arg(long, value_name = "N", value_parser = positive, hide = true)]
    pub limit_batches: Option<usize>,
    /// Steps between read-backs of the loss from the device.
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = positive, hide = true)]
    pub log_interval: usize,
    /// f32, f16 or bf16: mixed precision computes matmul and convolutions in f16 or bf16 and
    /// keeps reductions, softmax, normalizations, losses, weights and optimizer state in f32;
    /// f16 scales the loss dynamically (starting at 2^16) and skips a step that overflows.
    #[arg(long, default_value = "f32", value_name = "P", value_parser = precision)]
    pub precision: Precision,
    /// Under f16 or bf16, matmul, linear layers and convolutions of fewer operations (two a
    /// multiply-add) stay in f32, where the low type saves nothing (default: 2^28, convolutions
    /// from 2^24; under bf16, matmul and linear layers from 1.5 x 2^30); 0 computes every one in
    /// the low type, as `torch.autocast`.
    #[arg(long, value_name = "OPS")]
    pub autocast_min_ops: Option<u64>,
    /// Batches per optimizer step (gradient accumulation): N batches of --batch-size update the
    /// weights as one batch of N times that size would.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub accumulate: usize,
    /// Scale the gradients down to this L2 norm at most before each step (after unscaling).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub clip_grad_norm: Option<f64>,
    /// On a non-finite loss or gradient, re-run that step op by op on the device and on the CPU
    /// and name the first op that went wrong, with its layer and input shapes (costs a
    /// read-back per step).
    #[arg(long)]
    pub detect_anomaly: bool,
    /// Train data-parallel on N GPUs of this machine: runs `mpiexec -n N` of this same command
    /// (MPI on PATH, and a build with the `mpi` feature; see docs/DISTRIBUTED.md).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub gpus: Option<usize>,
    /// On a GPU, time each product's and convolution's cuts into workgroups (tile size, K
    /// splits) the first time its shape is met and keep the fastest, in a file per adapter
    /// under the cache directory (LIANDAN_CACHE_DIR, else the platform's; LIANDAN_AUTOTUNE=1
    /// does the same). The first steps are slower; later runs read the file.
    #[arg(long)]
    pub autotune: bool,
    /// On a GPU whose f16 products run on tensor cores, run the larger f32 convolutions there
    /// too, each operand scaled by a power of two and rounded to f16 (TF32's 11 significant
    /// bits; sums in f32), as PyTorch's `torch.backends.cudnn.allow_tf32` does on CUDA
    /// (LIANDAN_CONV_TF32=1 does the same). Off: f32 convolutions are exact f32.
    #[arg(long)]
    pub conv_tf32: bool,
    #[command(flatten)]
    pub board: TensorBoardArgs,
}

/// How the user's own data is read (flattened into `--data`'s options).
#[derive(Args, Clone, Debug, Default)]
pub struct OwnDataArgs {
    /// With --data TABLE.csv: the column of class labels; the other numeric columns are the
    /// features, standardized over the training rows (the mlp trains on tables).
    #[arg(long, value_name = "COLUMN")]
    pub target: Option<String>,
    /// With --data IMAGE_DIR: the per-channel mean of pixel values in [0, 1] to normalize with,
    /// comma-separated (default: computed over the training images).
    #[arg(long, value_name = "M[,M,M]", requires = "std")]
    pub mean: Option<String>,
    /// With --data IMAGE_DIR: the per-channel standard deviation to normalize with.
    #[arg(long, value_name = "S[,S,S]", requires = "mean")]
    pub std: Option<String>,
}

/// The TensorBoard options of `train` (flattened into its arguments).
#[derive(Args, Clone, Default)]
pub struct TensorBoardArgs {
    /// Write TensorBoard event files into --out: the loss of every step, accuracy, learning
    /// rate and samples/s at each log interval, validation loss and accuracy each epoch
    /// (view with `tensorboard --logdir runs`).
    #[arg(long)]
    pub tensorboard: bool,
    /// With --tensorboard: also a histogram of every weight tensor after each epoch.
    #[arg(long, requires = "tensorboard")]
    pub histograms: bool,
}

impl TensorBoardArgs {
    /// What `fit` is asked to write, into the run's directory `out`.
    pub fn config(&self, out: &Path) -> Option<TensorBoardConfig> {
        self.tensorboard.then(|| TensorBoardConfig { dir: out.to_path_buf(), histograms: self.histograms })
    }
}

#[derive(Args)]
pub struct EvalArgs {
    /// The zoo model the checkpoint is for.
    #[arg(long)]
    pub model: String,
    /// A safetensors state dict: ours (best.safetensors, last.safetensors) or PyTorch's
    /// `save_file(model.state_dict(), path)`.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: PathBuf,
    #[command(flatten)]
    pub data: DataArgs,
    /// The split to evaluate: test, train or val (default: test; `bundled` has no test split,
    /// so there val: the 2,000 images held out from training).
    #[arg(long, value_name = "SPLIT", value_parser = ["test", "train", "val"])]
    pub split: Option<String>,
    /// Samples per batch.
    #[arg(long, default_value_t = 500, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub batch_size: usize,
}

#[derive(Args)]
pub struct PredictArgs {
    /// The zoo model the checkpoint is for.
    #[arg(long)]
    pub model: String,
    /// A safetensors state dict (ours or PyTorch's).
    #[arg(long, value_name = "FILE")]
    pub checkpoint: PathBuf,
    /// An image file or a directory of them (files that are not images are skipped and
    /// counted): PNG, JPEG, .npy (u8 pixels, or floats in [0, 1]; channels first: [H, W],
    /// [N, H, W], [C, H, W] or [N, C, H, W]) or IDX (possibly gzipped). Images are turned into
    /// the model's input (1x28x28 grayscale for the MNIST models, 3x32x32 RGB for resnet18 and
    /// vit): color converted and size changed as needed, each with a note on stderr, then
    /// normalized as in training. A model trained on an image folder takes PNG or JPEG images
    /// of any size, prepared as in its training (resized to cover, then center-cropped); one
    /// trained on a table, a CSV file with its columns (a prediction per row).
    #[arg(long, value_name = "FILE|DIR")]
    pub input: PathBuf,
    /// cpu, gpu or gpu:N.
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// For the vae: the PNG grid to write (each input above its reconstruction, then samples
    /// drawn from the prior). Default vae-predict.png, which is never overwritten unless named here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Args)]
pub struct PlotArgs {
    /// history.json or history.csv as `liandan train` wrote it.
    pub history: PathBuf,
    /// The PNG to write (default: beside the history, history.png).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Args)]
pub struct ProfileArgs {
    /// The zoo model (`liandan zoo` lists them).
    #[arg(long)]
    pub model: String,
    /// Samples per batch (default: the model's reference batch, from docs/MODEL_ZOO.md).
    #[arg(long, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub batch: Option<usize>,
    /// Training steps to profile.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub steps: usize,
    /// Steps run first and left out (shader compilation, first allocations); on a GPU, at least
    /// one second of them after the first (a driver may run kernels it has just compiled slower
    /// at first)
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: usize,
    /// cpu, gpu or gpu:N (default: LIANDAN_DEVICE, else a hardware GPU, else the CPU).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// f32, f16 or bf16 (as `train --precision`: f16 with the dynamic loss scaler, whose
    /// overflow check and scale stay on the device).
    #[arg(long, default_value = "f32", value_name = "P", value_parser = precision)]
    pub precision: Precision,
    /// As `train --autocast-min-ops`: under f16 or bf16, smaller products stay in f32.
    #[arg(long, value_name = "OPS")]
    pub autocast_min_ops: Option<u64>,
    /// Also write a Chrome trace (JSON for https://ui.perfetto.dev or chrome://tracing).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Also record each call's input shapes, and print the costliest (op, input shapes) pairs
    /// with the products' and convolutions' TFLOP/s (PyTorch's `record_shapes` and
    /// `with_flops`); the trace then carries every call's shapes.
    #[arg(long)]
    pub shapes: bool,
    /// On a GPU, time each product's and convolution's cuts into workgroups (tile size, K
    /// splits) the first time its shape is met and keep the fastest, in a file per adapter
    /// under the cache directory (LIANDAN_CACHE_DIR, else the platform's; LIANDAN_AUTOTUNE=1
    /// does the same). The first steps are slower; later runs read the file.
    #[arg(long)]
    pub autotune: bool,
    /// On a GPU whose f16 products run on tensor cores, run the larger f32 convolutions there
    /// too, each operand scaled by a power of two and rounded to f16 (TF32's 11 significant
    /// bits; sums in f32), as PyTorch's `torch.backends.cudnn.allow_tf32` does on CUDA
    /// (LIANDAN_CONV_TF32=1 does the same). Off: f32 convolutions are exact f32.
    #[arg(long)]
    pub conv_tf32: bool,
}

#[derive(Args)]
pub struct FindBatchSizeArgs {
    /// The zoo model (`liandan zoo` lists them).
    #[arg(long)]
    pub model: String,
    /// cpu, gpu or gpu:N (default: LIANDAN_DEVICE, else a hardware GPU, else the CPU).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// f32, f16 or bf16 (as `train --precision`).
    #[arg(long, default_value = "f32", value_name = "P", value_parser = precision)]
    pub precision: Precision,
    /// Let tensors on the device hold at most this many MiB (needed on the CPU, where the host
    /// swaps rather than failing an allocation; on a GPU, to ask about a smaller one).
    #[arg(long, value_name = "MiB", allow_hyphen_values = true)]
    pub budget: Option<f64>,
    /// The largest batch to try.
    #[arg(long, default_value_t = 4096, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub max: usize,
}

/// The options given on the command line rather than left to their defaults, by their field
/// names (`batch_size`).
pub fn given(matches: Option<&clap::ArgMatches>) -> Vec<String> {
    let Some(m) = matches else { return Vec::new() };
    m.ids().filter(|id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)).map(|id| id.as_str().to_string()).collect()
}

/// `f32`, `f16` or `bf16`.
fn precision(s: &str) -> Result<Precision, String> {
    Precision::parse(s).map_err(|_| format!("`{s}` is not a precision; use f32, f16 or bf16"))
}

/// A whole number of at least 1.
fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n as usize),
        Ok(n) => Err(format!("{n} is not allowed; give a positive whole number such as 64")),
        Err(_) => Err(format!("`{s}` is not a whole number; give a positive whole number such as 64")),
    }
}

/// `liandan export`: a zoo model and its checkpoint, written as ONNX.
#[derive(Args)]
pub struct ExportArgs {
    /// The zoo model the checkpoint is for (`liandan zoo` lists them).
    #[arg(long)]
    pub model: String,
    /// A safetensors state dict: ours (best.safetensors) or PyTorch's `save_file(model.state_dict(), path)`.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: PathBuf,
    /// The ONNX file to write; one already there is replaced, as torch.onnx.export replaces it.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// `dynamic` (axis 0 of the input is a `batch` of any size) or a fixed batch size.
    #[arg(long, default_value = "dynamic", value_name = "dynamic|N", allow_hyphen_values = true)]
    pub batch: String,
    /// The ONNX opset: 17 to 21 (exact GELU is the `Gelu` operator from 20).
    #[arg(long, default_value = "17", value_name = "N", allow_hyphen_values = true)]
    pub opset: String,
}
