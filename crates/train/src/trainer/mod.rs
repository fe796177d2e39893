//! The training loop: [`Trainer`], torchkeras' `KerasModel` in Rust.
//!
//! `Trainer::new(model, loss, optimizer)` plus metrics, an optional scheduler and callbacks;
//! [`Trainer::fit`] trains with a [`FitConfig`] (epochs, early stopping on a monitored metric,
//! checkpoints, logging, seed, resume) and returns the [`History`]; [`Trainer::evaluate`] and
//! [`Trainer::predict`] run the model without training it.
//!
//! What `fit` writes to `checkpoint_dir`: `best.safetensors` (the model's state dict at the
//! best monitored epoch, a plain file PyTorch loads with `load_state_dict`),
//! `last.safetensors` (the whole training state after every epoch, see [`state`]),
//! `history.csv`, `history.json` and `history.png` (with the default feature `plot`). Every
//! file is written atomically. With [`FitConfig::tensorboard`], an event file for TensorBoard
//! as well.
//!
//! ```no_run
//! use liandan_train::data::{bundled_mnist, DataLoader};
//! use liandan_train::nn::{zoo, Device, ModuleExt, Reduction};
//! use liandan_train::optim::{Adadelta, AdadeltaConfig};
//! use liandan_train::sched::StepLR;
//! use liandan_train::trainer::{Accuracy, FitConfig, Mode, SchedulerStep, Trainer};
//! # fn main() -> liandan_train::Result<()> {
//! let device = Device::best()?;
//! let (train, val) = bundled_mnist()?;
//! let train = DataLoader::new(train, 64, &device)?.shuffle(1);
//! let val = DataLoader::new(val, 1000, &device)?;
//! let model = zoo::build("mnist_cnn", &device)?;
//! let mut optimizer = Adadelta::new(model.named_parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() })?;
//! let scheduler = StepLR::new(&mut optimizer, 1, 0.7)?;
//! let mut trainer = Trainer::new(model, |out, y| Ok(out.nll_loss(y, Reduction::Mean)?), optimizer)
//!     .with_metric(Accuracy::new())
//!     .with_scheduler(scheduler, SchedulerStep::Epoch);
//! let mut config = FitConfig::new(5);
//! config.checkpoint_dir = Some("runs/mnist".into());
//! let history = trainer.fit(&train, Some(&val), &config)?;
//! println!("best val_acc {:?}", history.best("val_acc", Mode::Max));
//! # Ok(())
//! # }
//! ```

pub mod anomaly;
mod board;
mod callback;
mod config;
mod ddp;
mod fit;
mod history;
mod metrics;
#[cfg(feature = "plot")]
mod plot;
mod progress;
pub mod state;
mod step;

pub use callback::Callback;
pub use config::{FitConfig, Mode, ProgressStyle, SchedulerStep, TensorBoardConfig};
pub use history::{round_significant, History};
pub use metrics::{Accuracy, Metric, TopK};
#[cfg(feature = "plot")]
pub use plot::plot_history;

use liandan_nn::{no_grad, Device, Layer, ModuleExt, Tensor};

use crate::amp::GradScaler;
use crate::data::DataLoader;
use crate::error::{Error, Result};
use crate::optim::Optimizer;
use crate::sched::LrScheduler;

/// The loss: the model's output and the targets in, a scalar out.
pub type LossFn = Box<dyn Fn(&Tensor, &Tensor) -> Result<Tensor> + Send>;

/// A model, its loss and optimizer, and what is measured and called while it trains.
pub struct Trainer<M: Layer> {
    model: M,
    loss: LossFn,
    optimizer: Box<dyn Optimizer>,
    scheduler: Option<(Box<dyn LrScheduler>, SchedulerStep)>,
    metrics: Vec<Box<dyn Metric>>,
    callbacks: Vec<Box<dyn Callback>>,
    device: Device,
    /// The f16 loss scaler, made by the first f16 `fit` unless given.
    scaler: Option<GradScaler>,
    /// The data-parallel job this trainer is one rank of ([`Trainer::with_distributed`]).
    ddp: Option<ddp::Ddp>,
    /// The TensorBoard event file of the `fit` under way, when it writes one.
    board: Option<board::Board>,
}

impl<M: Layer> Trainer<M> {
    /// A trainer of `model` (on the device its tensors are on) that minimizes `loss` with
    /// `optimizer`.
    pub fn new(model: M, loss: impl Fn(&Tensor, &Tensor) -> Result<Tensor> + Send + 'static, optimizer: impl Optimizer + 'static) -> Trainer<M> {
        Self::with_boxed(model, Box::new(loss), Box::new(optimizer))
    }

    /// As [`Trainer::new`], for a loss and an optimizer chosen at run time.
    pub fn with_boxed(model: M, loss: LossFn, optimizer: Box<dyn Optimizer>) -> Trainer<M> {
        let mut device = Device::cpu();
        model.visit("", &mut |_, t, _| device = t.device().clone());
        Trainer { model, loss, optimizer, scheduler: None, metrics: Vec::new(), callbacks: Vec::new(), device, scaler: None, ddp: None, board: None }
    }

    /// Adds a metric, reported for training and (as `val_` + name) validation.
    pub fn with_metric(mut self, metric: impl Metric + 'static) -> Self {
        self.metrics.push(Box::new(metric));
        self
    }

    /// Adds a metric chosen at run time.
    pub fn with_boxed_metric(mut self, metric: Box<dyn Metric>) -> Self {
        self.metrics.push(metric);
        self
    }

    /// Sets the learning-rate scheduler, stepped once per epoch or once per batch. Per epoch it
    /// is handed the monitored value (for `ReduceLROnPlateau`).
    pub fn with_scheduler(mut self, scheduler: impl LrScheduler + 'static, when: SchedulerStep) -> Self {
        self.scheduler = Some((Box::new(scheduler), when));
        self
    }

    /// Sets a scheduler chosen at run time.
    pub fn with_boxed_scheduler(mut self, scheduler: Box<dyn LrScheduler>, when: SchedulerStep) -> Self {
        self.scheduler = Some((scheduler, when));
        self
    }

    /// Adds a callback.
    pub fn with_callback(mut self, callback: impl Callback + 'static) -> Self {
        self.callbacks.push(Box::new(callback));
        self
    }

    /// Sets the loss scaler of f16 runs (by default [`GradScaler::new`]: PyTorch's settings).
    pub fn with_grad_scaler(mut self, scaler: GradScaler) -> Self {
        self.scaler = Some(scaler);
        self
    }

    /// The loss scaler, once an f16 run has made one.
    pub fn grad_scaler(&self) -> Option<&GradScaler> {
        self.scaler.as_ref()
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The model, to change or take out (`into_model`).
    pub fn model_mut(&mut self) -> &mut M {
        &mut self.model
    }

    pub fn into_model(self) -> M {
        self.model
    }

    /// The device the model lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The optimizer.
    pub fn optimizer(&self) -> &dyn Optimizer {
        &*self.optimizer
    }

    /// The loss and every metric over `data` in evaluation mode without gradients, as
    /// `[("loss", ..), ("acc", ..), ...]`; the loss is the mean over samples. In a
    /// data-parallel job each rank evaluates its share of `data` with rank 0's buffers, and
    /// every rank returns the values over all of it.
    pub fn evaluate(&mut self, data: &DataLoader) -> Result<Vec<(String, f64)>> {
        self.evaluate_with_progress(data, ProgressStyle::Quiet)
    }

    /// [`Trainer::evaluate`] showing its progress as `style` says (a bar, or a few lines). The
    /// device is synchronized after each batch while progress is shown, so that it is honest.
    /// On the CPU it runs on the kernels' pool, as [`Trainer::fit`] does.
    pub fn evaluate_with_progress(&mut self, data: &DataLoader, style: ProgressStyle) -> Result<Vec<(String, f64)>> {
        let device = self.device.clone();
        liandan_backend_cpu::on_pool_for(&device, || self.evaluate_here(data, style))
    }

    /// [`Trainer::evaluate_with_progress`] on the calling thread.
    fn evaluate_here(&mut self, data: &DataLoader, style: ProgressStyle) -> Result<Vec<(String, f64)>> {
        check_loader("evaluate", data, &self.device)?;
        self.sync_buffers()?;
        let data = self.eval_shard(data)?;
        let mut progress = progress::Progress::new(style);
        progress.start_eval(data.len());
        self.model.eval();
        for m in &mut self.metrics {
            m.reset();
        }
        let mut loss_sum: Option<Tensor> = None;
        let (mut samples, mut batches) = (0usize, 0usize);
        let result = no_grad(|| -> Result<()> {
            for batch in data.iter(0)? {
                let batch = batch?;
                let out = self.model.forward(&batch.input)?;
                let n = batch.target.shape()[0];
                // The batch's mean loss times its size: the sum over samples, kept on the device.
                let l = (self.loss)(&out, &batch.target)?.mul_scalar(n as f64)?;
                loss_sum = Some(match loss_sum.take() {
                    Some(s) => s.add(&l)?,
                    None => l,
                });
                samples += n;
                for m in &mut self.metrics {
                    m.update(&out, &batch.target)?;
                }
                if style != ProgressStyle::Quiet {
                    self.device.synchronize()?;
                    progress.update(batches + 1, samples, &[])?;
                }
                batches += 1;
            }
            Ok(())
        });
        progress.finish();
        self.model.train();
        result?;
        // A rank's share may be empty (fewer samples than ranks): it adds nothing.
        let mut sums = [loss_sum.map_or(Ok(0.0), |s| s.item_f64())?, samples as f64];
        self.sum_over_ranks(&mut sums);
        let mut out = vec![("loss".to_string(), sums[0] / sums[1])];
        out.extend(self.metric_values()?);
        for m in &mut self.metrics {
            m.reset();
        }
        Ok(out)
    }

    /// The model's outputs for every sample of `data`, in order, stacked along the first
    /// dimension (evaluation mode, no gradients), on the model's device.
    pub fn predict(&mut self, data: &DataLoader) -> Result<Tensor> {
        check_loader("predict", data, &self.device)?;
        predict(&mut self.model, data)
    }
}

/// [`Trainer::predict`] for a model without a trainer (`liandan predict`).
pub fn predict<M: Layer>(model: &mut M, data: &DataLoader) -> Result<Tensor> {
    model.eval();
    let outputs = no_grad(|| data.iter(0)?.map(|b| Ok(model.forward(&b?.input)?)).collect::<Result<Vec<Tensor>>>());
    model.train();
    let outputs = outputs?;
    if outputs.is_empty() {
        return Err(Error::InvalidArgument { op: "predict", what: "there is nothing to predict (no samples)".into() });
    }
    Ok(Tensor::cat(&outputs.iter().collect::<Vec<_>>(), 0usize)?)
}

/// The loader must have batches, on the model's device.
pub(crate) fn check_loader(op: &'static str, data: &DataLoader, device: &Device) -> Result<()> {
    if data.is_empty() {
        return Err(Error::InvalidArgument { op, what: "the data loader has no batches (an empty dataset?)".into() });
    }
    if data.device() != device {
        return Err(Error::InvalidArgument {
            op,
            what: format!("the data loader puts batches on {:?} but the model is on {device:?}; build both on one device", data.device()),
        });
    }
    Ok(())
}
