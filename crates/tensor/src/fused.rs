//! Fused kernels: the switch that turns them off, and how an op asks its device for one.
//!
//! A fused kernel is an optional, faster route to a composite that already exists, never the
//! only definition: each is the kernel of a custom op ([`crate::custom::CustomOp`]), whose
//! composite is both its fallback and its oracle. An op asks its inputs' device with
//! [`kernel`] (or [`run`], which wraps the buffers as tensors); `None` means fusion is off or
//! the device has no kernel for it, and the op runs its composite. The conformance suite runs
//! every fused op with fusion on and off on the same device and compares outputs and
//! gradients (`conformance::fused`).
//!
//! `LIANDAN_FUSION=0` ([`crate::settings::FUSION`], read once) turns every fused kernel off, so a
//! wrong result can be bisected to the fusion; [`no_fusion`] does the same for one thread.

use std::cell::Cell;

use crate::backend::{CustomKernel, Storage, Strided};
use crate::custom::CustomOp;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::Tensor;

thread_local! {
    static FUSION_ON: Cell<bool> = const { Cell::new(true) };
}

/// True when fused kernels may run on this thread: neither `LIANDAN_FUSION=0` nor inside
/// [`no_fusion`]. (A bad `LIANDAN_FUSION` leaves fusion on here; the fused op itself then fails
/// with the error.)
pub fn fusion_enabled() -> bool {
    crate::settings::options().map_or(true, |o| o.fusion) && FUSION_ON.with(|f| f.get())
}

/// Turns fused kernels off on this thread until dropped: every composite runs its primitives.
pub struct NoFusionGuard {
    prev: bool,
}

impl NoFusionGuard {
    pub fn new() -> NoFusionGuard {
        NoFusionGuard { prev: FUSION_ON.with(|f| f.replace(false)) }
    }
}

impl Default for NoFusionGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoFusionGuard {
    fn drop(&mut self) {
        FUSION_ON.with(|f| f.set(self.prev));
    }
}

/// Runs `f` with fused kernels off on this thread (its backward too, if run inside `f`).
pub fn no_fusion<R>(f: impl FnOnce() -> R) -> R {
    let _guard = NoFusionGuard::new();
    f()
}

/// Asks the inputs' device to run `op` on `inputs` as one kernel ([`crate::Backend::custom`]).
/// `None` when fusion is off or the device has no kernel for it (the caller then runs the
/// composite). The inputs are on one device, as the caller has checked; an op documents the
/// layouts its kernels take (the tensor crate's own take contiguous inputs).
pub fn kernel(op: &dyn CustomKernel, inputs: &[&Tensor]) -> Option<Result<Vec<Storage>>> {
    let first = inputs.first()?;
    if let Err(e) = crate::settings::options() {
        return Some(Err(e.into()));
    }
    if !fusion_enabled() {
        return None;
    }
    let storages: Vec<Storage> = inputs.iter().map(|t| t.storage()).collect();
    let views: Vec<Strided> = inputs.iter().zip(&storages).map(|(t, s)| Strided { storage: &**s, layout: t.layout(), dtype: t.dtype() }).collect();
    first.device().backend().custom(op, &views)
}

/// [`kernel`], its buffers wrapped as the contiguous tensors [`CustomOp::outputs`] describes
/// (outside the graph), or an error naming the op where the kernel returned another number of
/// buffers.
pub fn run(op: &dyn CustomOp, inputs: &[&Tensor]) -> Option<Result<Vec<Tensor>>> {
    let outs = kernel(op, inputs)?;
    let device = inputs[0].device();
    Some(outs.and_then(|outs| {
        let specs = op.outputs(inputs);
        if outs.len() != specs.len() {
            let detail = format!("the fused kernel returned {} buffers; the op has {} outputs", outs.len(), specs.len());
            return Err(Error::Backend { backend: device.backend().name(), op: op.name(), detail });
        }
        Ok(outs.into_iter().zip(specs).map(|(s, (shape, dtype))| Tensor::from_parts(s, Layout::contiguous(&shape), dtype, device, None)).collect())
    }))
}

/// [`run`], or `op`'s composite (without the graph) where no kernel runs: the outputs of an op
/// whose caller records its own backward rule over them.
pub fn run_or_composite(op: &dyn CustomOp, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    match run(op, inputs) {
        Some(outs) => outs,
        None => crate::grad_mode::no_grad(|| op.composite(inputs)),
    }
}

/// The options of the tensor crate's batch normalization ops (`ops::BatchNormTrain`,
/// `ops::BatchNormBackward`), as `torch.nn.functional.batch_norm` names them; `affine`:
/// `weight` and `bias` are given; `running`: `running_mean` and `running_var` are given;
/// `relu`: a ReLU follows (`Tensor::batch_norm_relu`); `count`: with the running statistics,
/// a batch count (`num_batches_tracked`, `Tensor::batch_norm_tracked`) the forward adds one to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    pub eps: f64,
    pub momentum: f64,
    pub affine: bool,
    pub running: bool,
    pub relu: bool,
    pub count: bool,
}

/// What one layer normalization (`ops::LayerNorm`, `ops::LayerNormBackward`) normalizes: rows
/// of `width` elements, `eps` as `torch.nn.functional.layer_norm` names it, and which of
/// `weight` and `bias` are given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNormOptions {
    pub width: usize,
    pub eps: f64,
    pub weight: bool,
    pub bias: bool,
}
