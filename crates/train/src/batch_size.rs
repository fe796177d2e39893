//! The largest batch that fits: [`find_batch_size`] runs full training steps at growing batch
//! sizes (doubling) until one no longer fits in the device's memory, then bisects between the
//! last size that fitted and the first that did not.
//!
//! "Does not fit" is an allocation that fails with `OutOfMemory`: the GPU's, or a budget set
//! with `Device::set_memory_budget` (on the CPU, where the host would rather swap than fail,
//! a budget is how to ask the question at all). A failed step drops everything it made, so the
//! search goes on in the same process; afterwards the device's memory in use is back where it
//! started, which is checked, not assumed.

use liandan_nn::{zoo, DType, Device, ModuleExt, Tensor};

use crate::amp::{GradScaler, Precision};
use crate::error::{Error, Result};

/// One batch size tried.
#[derive(Clone, Debug, PartialEq)]
pub struct Trial {
    pub batch: usize,
    pub fits: bool,
    /// The device's peak bytes in use during the trial (up to the failure, when it failed).
    pub peak_bytes: u64,
}

/// What [`find_batch_size`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchSizeReport {
    /// The largest batch that fits (or `max`, when even that one did).
    pub batch: usize,
    /// The peak bytes in use during a step at that batch.
    pub peak_bytes: u64,
    /// Every size tried, in order.
    pub trials: Vec<Trial>,
}

fn is_oom(e: &Error) -> bool {
    matches!(e, Error::Tensor(liandan_nn::TensorError::OutOfMemory { .. }) | Error::Nn(liandan_nn::Error::Tensor(liandan_nn::TensorError::OutOfMemory { .. })))
}

/// Grows the batch from `start` (doubling, up to `max`) while `step(batch)` succeeds, then
/// bisects; `step` must run one full training step at that batch and drop all it made. An
/// error other than running out of memory ends the search with that error.
pub fn find_batch_size(device: &Device, start: usize, max: usize, mut step: impl FnMut(usize) -> Result<()>) -> Result<BatchSizeReport> {
    if start == 0 || max < start {
        return Err(Error::InvalidArgument { op: "find_batch_size", what: format!("start {start} and max {max} must satisfy 1 <= start <= max") });
    }
    let stats = || device.memory_stats().ok_or_else(|| Error::InvalidArgument { op: "find_batch_size", what: format!("{device} keeps no memory statistics") });
    device.synchronize()?;
    device.empty_cache();
    let start_in_use = stats()?.in_use;
    let mut trials = Vec::new();
    let mut attempt = |batch: usize| -> Result<bool> {
        device.reset_peak_memory();
        let outcome = step(batch);
        let _ = device.synchronize(); // an asynchronous device reports a failure on its next wait
        device.empty_cache();
        let after = stats()?;
        let fits = match outcome {
            Ok(()) => true,
            Err(e) if is_oom(&e) => false,
            Err(e) => return Err(e),
        };
        if after.in_use != start_in_use {
            return Err(Error::State {
                op: "find_batch_size",
                detail: format!(
                    "after a step at batch {batch}, {} bytes are in use on {device}, not the {start_in_use} of before: the step leaks",
                    after.in_use
                ),
            });
        }
        trials.push(Trial { batch, fits, peak_bytes: after.peak });
        Ok(fits)
    };
    let (mut good, mut bad) = (None, None);
    let mut batch = start;
    loop {
        if attempt(batch)? {
            good = Some(batch);
            if batch == max {
                break;
            }
            batch = (batch * 2).min(max);
        } else {
            bad = Some(batch);
            break;
        }
    }
    let Some(mut good) = good else {
        return Err(Error::InvalidArgument { op: "find_batch_size", what: format!("not even a batch of {start} fits on {device}") });
    };
    if let Some(mut bad) = bad {
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            if attempt(mid)? {
                good = mid;
            } else {
                bad = mid;
            }
        }
    }
    let peak_bytes = trials.iter().rev().find(|t| t.batch == good && t.fits).map_or(0, |t| t.peak_bytes);
    Ok(BatchSizeReport { batch: good, peak_bytes, trials })
}

/// A full training step of the zoo model `name` at a given batch, for [`find_batch_size`]:
/// a fresh model and its `docs/MODEL_ZOO.md` optimizer, seeded random inputs and labels, two
/// steps (the second holds the optimizer's state as well as new gradients: the steady peak),
/// under `precision`'s autocast with the f16 loss scaler.
pub fn zoo_step(name: &str, precision: Precision, device: &Device) -> Result<impl FnMut(usize) -> Result<()>> {
    let spec = zoo::spec(name)?;
    let device = device.clone();
    Ok(move |batch: usize| -> Result<()> {
        liandan_nn::manual_seed(0);
        let model = zoo::build(spec.name, &device)?;
        let mut optimizer = crate::optim::for_zoo(spec, model.named_parameters())?;
        let mut shape = spec.input_shape.to_vec();
        shape[0] = batch;
        let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, &device)?;
        let classes = match spec.target {
            zoo::Target::Classes(k) => k as i64,
            zoo::Target::Reconstruction => 1,
        };
        let y = Tensor::from_vec((0..batch as i64).map(|i| i % classes).collect::<Vec<_>>(), &[batch], &device)?;
        let mut scaler = (precision == Precision::F16).then(GradScaler::new);
        for _ in 0..2 {
            optimizer.zero_grad();
            let loss = {
                let _autocast = precision.autocast(None)?;
                model.loss(&x, Some(&y))?
            };
            match &mut scaler {
                Some(s) => {
                    s.backward(&loss)?;
                    s.unscale_(&model.parameters())?;
                }
                None => loss.backward()?,
            }
            optimizer.step()?;
        }
        Ok(())
    })
}
