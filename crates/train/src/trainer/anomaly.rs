//! Anomaly detection (`torch.autograd.detect_anomaly`, with a CPU beside it): a training step
//! whose loss or gradients went non-finite is run again op by op, forward and backward, on the
//! training device and on the CPU, and the first op whose output is non-finite or differs from
//! the CPU's beyond tolerance is named with its layer and input shapes.
//!
//! The two runs see the same weights, batch, precision and random stream, so they make the same
//! ops in the same order; op `i` of one is compared with op `i` of the other. Layers are named
//! as `liandan summary` names its rows (`Sequential-1 > Linear-4`); an op of the backward pass
//! is named after the forward op it differentiates and that op's layer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use liandan_nn::observe::{observe_ops, OpRecord};
use liandan_nn::{summary, Device, Layer, ModuleExt, Tensor};

use super::{FitConfig, LossFn};
use crate::data::Batch;
use crate::error::Result;

/// Outputs closer than `ATOL * max|cpu| + RTOL * |cpu|` to the CPU's agree: loose enough for
/// f16 rounding and a GPU's summation order, tight enough to catch a wrong kernel.
const RTOL: f64 = 1e-2;
const ATOL: f64 = 1e-3;

/// One op of a traced step.
struct Event {
    op: String,
    layer: String,
    input_shapes: Vec<Vec<usize>>,
    output: Tensor,
}

impl Event {
    fn describe(&self) -> String {
        format!("op `{}` in {} (inputs {:?}, output {:?})", self.op, self.layer, self.input_shapes, self.output.shape())
    }
}

/// Runs forward, loss and backward of `batch` with every op recorded.
fn trace<M: Layer>(model: &M, loss_fn: &LossFn, batch: &Batch, config: &FitConfig, seed: u64) -> Result<Vec<Event>> {
    let events = Rc::new(RefCell::new(Vec::new()));
    let layers: Rc<RefCell<HashMap<u64, String>>> = Rc::default();
    let (ev, ly) = (events.clone(), layers.clone());
    let observer = move |r: &OpRecord| {
        if !r.output.dtype().is_float() {
            return;
        }
        let (op, layer) = match &r.backward_of {
            None => {
                let layer = summary::current_layer().unwrap_or_else(|| "the loss (outside any layer)".into());
                ly.borrow_mut().insert(r.output.id(), layer.clone());
                (r.op.clone(), layer)
            }
            Some((rule, of)) => (format!("{} (in the backward of {rule})", r.op), ly.borrow().get(of).cloned().unwrap_or_else(|| "the loss".into())),
        };
        let input_shapes = r.inputs.iter().map(|t| t.shape().to_vec()).collect();
        ev.borrow_mut().push(Event { op, layer, input_shapes, output: r.output.detach() });
    };
    model.zero_grad();
    liandan_nn::manual_seed(seed);
    observe_ops(observer, || {
        summary::with_layer_path(|| -> Result<()> {
            let loss = {
                let _autocast = config.precision.autocast(config.autocast_min_ops)?;
                let out = model.forward(&batch.input)?;
                loss_fn(&out, &batch.target)?
            };
            loss.backward()?;
            Ok(())
        })
    })?;
    model.zero_grad();
    Ok(Rc::try_unwrap(events).map(RefCell::into_inner).unwrap_or_default())
}

fn finite(values: &[f64]) -> bool {
    values.iter().all(|v| v.is_finite())
}

/// The report of [`crate::Error::Anomaly`]: what the step did wrong and where.
pub(crate) fn diagnose<M: Layer>(model: &mut M, loss_fn: &LossFn, batch: &Batch, config: &FitConfig, seed: u64) -> Result<String> {
    let device = batch.input.device().clone();
    let on_device = trace(model, loss_fn, batch, config, seed)?;
    if device.is_cpu() {
        for e in &on_device {
            if !finite(&e.output.to_vec_f64()?) {
                return Ok(format!("the first non-finite value comes from {} (on the CPU)", e.describe()));
            }
        }
        return Ok("re-run op by op, the step stays finite: the non-finite value does not reproduce".into());
    }
    let on_cpu = trace_on_cpu(model, loss_fn, batch, config, seed)?;
    for (i, (d, c)) in on_device.iter().zip(&on_cpu).enumerate() {
        if d.op != c.op || d.output.shape() != c.output.shape() {
            return Ok(format!(
                "the device and the CPU ran different ops from op {i} on ({} against {}); no non-finite value before it",
                d.describe(),
                c.describe()
            ));
        }
        let (dv, cv) = (d.output.to_vec_f64()?, c.output.to_vec_f64()?);
        if !finite(&dv) {
            let cpu = if finite(&cv) { "finite on the CPU" } else { "non-finite on the CPU as well" };
            return Ok(format!("the first non-finite value comes from {} on {device} ({cpu})", d.describe()));
        }
        let scale = cv.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if let Some(k) = dv.iter().zip(&cv).position(|(a, b)| (a - b).abs() > ATOL * scale + RTOL * b.abs()) {
            return Ok(format!(
                "{} on {device} diverges from the CPU first: element {k} is {} there and {} on the CPU (tolerance {ATOL} x max + {RTOL} x value)",
                d.describe(),
                dv[k],
                cv[k]
            ));
        }
    }
    Ok(format!("re-run op by op on {device} and on the CPU, the step stays finite and agrees: the non-finite value does not reproduce"))
}

/// [`trace`] with the model and batch copied to the CPU; the model's own tensors (the ones
/// the optimizer holds) are put back afterwards, whatever happens.
fn trace_on_cpu<M: Layer>(model: &mut M, loss_fn: &LossFn, batch: &Batch, config: &FitConfig, seed: u64) -> Result<Vec<Event>> {
    let mut originals = Vec::new();
    model.visit("", &mut |_, t, _| originals.push(t.clone()));
    let cpu = Device::cpu();
    let traced = (|| -> Result<Vec<Event>> {
        model.to_device(&cpu)?;
        let batch = Batch { input: batch.input.to_device(&cpu)?.detach(), target: batch.target.to_device(&cpu)?.detach() };
        trace(model, loss_fn, &batch, config, seed)
    })();
    let mut i = 0;
    model.visit_mut("", &mut |_, t, _| {
        *t = originals[i].clone();
        i += 1;
        Ok(())
    })?;
    traced
}
