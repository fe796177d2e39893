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
//! `history.csv`, `history.json` and `history.png`. Every file is written atomically.
//!
//! ```no_run
//! use liandan_train::trainer::{Accuracy, FitConfig, Trainer};
//! use liandan_train::optim::{Adadelta, AdadeltaConfig};
//! use liandan_train::nn::{zoo, Device, ModuleExt, Reduction};
//! # fn run(train: &dyn liandan_train::data::Dataset, val: &dyn liandan_train::data::Dataset) -> liandan_train::Result<()> {
//! let model = zoo::build("mnist_cnn", &Device::best())?;
//! let optimizer = Adadelta::new(model.named_parameters(), AdadeltaConfig { lr: 1.0, ..Default::default() })?;
//! let mut trainer = Trainer::new(model, |out, y| Ok(out.nll_loss(y, Reduction::Mean)?), optimizer).with_metric(Accuracy::new());
//! let mut config = FitConfig::new(5, 64);
//! config.checkpoint_dir = Some("runs/mnist".into());
//! let history = trainer.fit(train, Some(val), &config)?;
//! println!("best val_acc {:?}", history.best("val_acc", liandan_train::trainer::Mode::Max));
//! # Ok(())
//! # }
//! ```

mod batches;
mod callback;
mod config;
mod fit;
mod history;
mod metrics;
mod plot;
mod progress;
pub mod state;

pub use callback::Callback;
pub use config::{FitConfig, Mode, ProgressStyle, SchedulerStep};
pub use history::History;
pub use metrics::{Accuracy, Metric, TopK};
pub use plot::plot_history;

use liandan_nn::{no_grad, Device, Layer, ModuleExt, Tensor};

use crate::data::Dataset;
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
        Trainer { model, loss, optimizer, scheduler: None, metrics: Vec::new(), callbacks: Vec::new(), device }
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
    /// `[("loss", ..), ("acc", ..), ...]`; the loss is the mean over samples.
    pub fn evaluate(&mut self, data: &dyn Dataset, batch_size: usize) -> Result<Vec<(String, f64)>> {
        check_batch_size(batch_size)?;
        if data.is_empty() {
            return Err(Error::InvalidArgument { op: "evaluate", what: "the dataset is empty".into() });
        }
        self.model.eval();
        for m in &mut self.metrics {
            m.reset();
        }
        let order: Vec<usize> = (0..data.len()).collect();
        let mut loss_sum: Option<Tensor> = None;
        let _guard = liandan_nn::NoGradGuard::new();
        let (model, loss, metrics) = (&self.model, &self.loss, &mut self.metrics);
        batches::for_each_batch(data, &order, batch_size, 0..batches::num_batches(data.len(), batch_size), &self.device, |_, b| {
            let out = model.forward(&b.x)?;
            // The batch's mean loss times its size: the sum over samples, kept on the device.
            let l = loss(&out, &b.y)?.mul_scalar(b.y.shape()[0] as f64)?;
            loss_sum = Some(match loss_sum.take() {
                Some(s) => s.add(&l)?,
                None => l,
            });
            for m in metrics.iter_mut() {
                m.update(&out, &b.y)?;
            }
            Ok(std::ops::ControlFlow::Continue(()))
        })?;
        let mut out = vec![("loss".to_string(), loss_sum.expect("a non-empty dataset has a batch").item_f64()? / data.len() as f64)];
        for m in &mut self.metrics {
            out.push((m.name(), m.compute()?));
            m.reset();
        }
        self.model.train();
        Ok(out)
    }

    /// The model's outputs for every sample of `data`, in order, stacked along the first
    /// dimension (evaluation mode, no gradients), on the model's device.
    pub fn predict(&mut self, data: &dyn Dataset, batch_size: usize) -> Result<Tensor> {
        predict(&mut self.model, &self.device, data, batch_size)
    }
}

/// [`Trainer::predict`] for a model without a trainer (`liandan predict`).
pub fn predict<M: Layer>(model: &mut M, device: &Device, data: &dyn Dataset, batch_size: usize) -> Result<Tensor> {
    check_batch_size(batch_size)?;
    if data.is_empty() {
        return Err(Error::InvalidArgument { op: "predict", what: "there is nothing to predict (no samples)".into() });
    }
    model.eval();
    let order: Vec<usize> = (0..data.len()).collect();
    let mut outputs = Vec::new();
    no_grad(|| {
        batches::for_each_batch(data, &order, batch_size, 0..batches::num_batches(data.len(), batch_size), device, |_, b| {
            outputs.push(model.forward(&b.x)?);
            Ok(std::ops::ControlFlow::Continue(()))
        })
    })?;
    model.train();
    Ok(Tensor::cat(&outputs.iter().collect::<Vec<_>>(), 0usize)?)
}

fn check_batch_size(batch_size: usize) -> Result<()> {
    if batch_size == 0 {
        return Err(Error::InvalidArgument { op: "batch", what: "batch size 0; give a positive batch size such as 64".into() });
    }
    Ok(())
}
