//! Mixed-precision training: the [`Precision`] a run computes in, and [`GradScaler`], the
//! dynamic loss scaler that keeps small f16 gradients from flushing to zero
//! (`torch.amp.GradScaler`).
//!
//! With `Precision::F16` or `BF16` the forward pass and the loss run inside an autocast region
//! ([`Precision::autocast`]: matmul and convolutions in the low type, reductions, softmax,
//! normalization and losses in f32; see [`liandan_nn::autocast()`]); parameters, their
//! gradients and the optimizer's state stay f32. A run leaves products under its precision's
//! minimum ([`Precision::min_ops`]) in f32, where the low type saves nothing. f16 holds nothing below 6e-8,
//! so the loss is multiplied by a large scale before backward and the gradients divided by it
//! after (a step whose forward pass computed nothing in f16 skips that: [`scaling_needed`]);
//! bf16 has f32's range and needs no scaler.
//!
//! A manual step, as PyTorch writes it:
//!
//! ```
//! use liandan_train::amp::GradScaler;
//! use liandan_train::nn::{autocast, zoo, DType, Device, ModuleExt, Tensor};
//! use liandan_train::optim::{clip_grad_norm_, Optimizer, Sgd, SgdConfig};
//! # fn main() -> liandan_train::Result<()> {
//! let dev = Device::cpu();
//! let model = zoo::build("mlp", &dev)?;
//! let mut opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, ..Default::default() })?;
//! let mut scaler = GradScaler::new();
//! let x = Tensor::rand(&[8, 1024], 0.0, 1.0, 1, DType::F32, &dev)?;
//! let y = Tensor::from_vec((0..8i64).collect::<Vec<_>>(), &[8], &dev)?;
//! let loss = autocast(DType::F16, || model.loss(&x, Some(&y)))?;
//! scaler.scale(&loss)?.backward()?;
//! let found_inf = scaler.unscale_(&model.parameters())?; // the gradients are true ones again
//! clip_grad_norm_(&model.parameters(), 1.0, 2.0)?;
//! // Skipped, and the scale halved, when a gradient overflowed; decided on the device.
//! scaler.step(&mut opt, &found_inf)?;
//! # Ok(())
//! # }
//! ```

use liandan_nn::{AutocastGuard, DType, MinOps, NoGradGuard, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::optim::fused::{nonfinite, unscale_check, update, update_foreach, NextScale, Scale, SCALER_STATE};
use crate::optim::Optimizer;

/// The smallest matmul or linear layer, in operations (two a multiply-add), that a training
/// run's autocast computes in the low type ([`AutocastGuard::with_minimums`]; convolutions
/// start at [`AUTOCAST_CONV_MIN_OPS`]). Below it the GPU's f16 products run on its ordinary
/// units in f32 arithmetic whatever their storage, so casting their operands adds kernels and
/// saves nothing. 0 lowers every product, as `torch.autocast` does.
pub const AUTOCAST_MIN_OPS: u64 = 1 << 28;

/// The smallest convolution a training run's autocast computes in the low type: 2^24
/// operations. A convolution's low output carries the low type on through the layers after it
/// (pooling, the next convolution), so a small first layer lowered spares the casts of its
/// large activations both ways, which cost more than its own low product: on an H100
/// mnist_cnn's f16 step (its first convolution 2^24.6) ran 2% faster so, seed003_cnn's
/// (2^26.6) 1-3%, and vit's, whose patch embedding (2^27.2) feeds an f32 residual stream, under
/// 1% slower. Left in f32, resnet18's stem (2^28.8) kept its first stage's activations in f32
/// beside their f16 casts.
pub const AUTOCAST_CONV_MIN_OPS: u64 = 1 << 24;

/// The smallest matmul or linear layer a training run's bf16 autocast computes in bf16 (its
/// convolutions start at [`AUTOCAST_CONV_MIN_OPS`]): 1.5 x 2^30 operations. A bf16 product on the
/// GPU's f16 tensor cores first scans each operand for its largest magnitude (to scale it into
/// f16's range), and under this size the scans and the casts around it cost more than the
/// tensor cores save: on an H100 mlp's first layer (2^30) and vit's attention projections
/// (2^29.2) made their steps slower than in f32. Convolutions stay at the lower minimum: a
/// low output carries the low type on, which resnet18's stem and shortcuts need.
pub const BF16_MATMUL_MIN_OPS: u64 = 3 << 29;

/// The type a training run computes in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Autocast to f16, with a [`GradScaler`].
    F16,
    /// Autocast to bf16 (f32's range: no scaler needed).
    BF16,
}

impl Precision {
    /// `f32`, `f16` or `bf16` (also `fp16`, `bfloat16`, ...).
    pub fn parse(s: &str) -> Result<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" | "32" => Ok(Precision::F32),
            "f16" | "fp16" | "float16" | "half" | "16" => Ok(Precision::F16),
            "bf16" | "bfloat16" => Ok(Precision::BF16),
            other => Err(Error::InvalidArgument { op: "precision", what: format!("`{other}` is not a precision; use f32, f16 or bf16") }),
        }
    }

    /// The autocast region a forward pass in this precision runs in, with matmul, linear
    /// layers and convolutions under `min_ops` operations left in f32 (`None`: this
    /// precision's own minimums, [`Precision::min_ops`]); `F32` closes any open region.
    pub fn autocast(self, min_ops: Option<u64>) -> Result<AutocastGuard> {
        Ok(AutocastGuard::with_minimums(self.dtype(), min_ops.map_or(self.min_ops(), MinOps::all))?)
    }

    /// [`Precision::autocast`] for a training step over `params`: the parameters the last
    /// step's forward cast are cast again at once, ahead of the forward
    /// ([`liandan_nn::cast_ahead`]), in a few kernels where the device has them rather than one
    /// each at first use.
    pub fn autocast_step(self, min_ops: Option<u64>, params: &[Tensor]) -> Result<AutocastGuard> {
        let guard = self.autocast(min_ops)?;
        liandan_nn::cast_ahead(params)?;
        Ok(guard)
    }

    /// The smallest products a training run computes in the low type: matmul and linear layers
    /// from [`AUTOCAST_MIN_OPS`] (bf16's from [`BF16_MATMUL_MIN_OPS`]), convolutions from
    /// [`AUTOCAST_CONV_MIN_OPS`].
    pub fn min_ops(self) -> MinOps {
        let matmul = if self == Precision::BF16 { BF16_MATMUL_MIN_OPS } else { AUTOCAST_MIN_OPS };
        MinOps { matmul, conv: AUTOCAST_CONV_MIN_OPS }
    }

    /// The dtype autocast computes matmul and convolutions in.
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
            Precision::BF16 => DType::BF16,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::BF16 => "bf16",
        })
    }
}

/// Whether the loss scaler has work in a step whose forward pass ran since `mark` (what
/// [`liandan_nn::autocast_lowered`] read before it): the pass computed something in a low type,
/// or a parameter is held in one. Otherwise every gradient came from f32 ops, which f16's
/// narrow range cannot flush, and the step runs as an f32 step does: unscaled, nothing read
/// back (a model whose products all stay under its precision's minimum).
pub fn scaling_needed(mark: u64, params: &[Tensor]) -> bool {
    liandan_nn::autocast_lowered() != mark || params.iter().any(|p| matches!(p.dtype(), DType::F16 | DType::BF16))
}

/// A one-element tensor that is 0 when every gradient of `params` is finite and NaN when any
/// element of any of them is infinite or NaN (`x * 0` is 0 for finite `x` and NaN otherwise,
/// and a sum of those cannot overflow). `None` when no parameter has a gradient. Nothing is
/// read back: the caller decides when to look. The gradients are checked joined into a few
/// flat tensors, one per dtype: three kernels or so, where four per parameter were some
/// hundreds for a transformer. A joined copy is multiplied by zero in place where the device
/// has a multi-tensor kernel for the scale update (one copy of the gradients at a time, not two).
pub fn nonfinite_flag(params: &[Tensor]) -> Result<Option<Tensor>> {
    let grads: Vec<Tensor> = params.iter().filter_map(Tensor::grad).collect();
    Ok(nonfinite(&grads)?)
}

/// The dynamic loss scale and its bookkeeping: everything a resumed run needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradScalerState {
    /// The current scale.
    pub scale: f64,
    /// Good steps since the scale last changed.
    pub growth_tracker: u64,
    /// Steps skipped so far for an overflow.
    pub skipped: u64,
}

/// The dynamic loss scaler (`torch.amp.GradScaler`, same defaults): the loss is multiplied by
/// `scale` (initially 2^16) before backward; after it, [`GradScaler::unscale_`] divides the
/// gradients back (before any clipping) and checks them; [`GradScaler::step`] skips the
/// optimizer's step and multiplies the scale by `backoff_factor` (0.5) when one was not
/// finite, and multiplies it by `growth_factor` (2) after `growth_interval` (2000) good steps
/// in a row.
///
/// Nothing waits for the check: [`GradScaler::step`] has the optimizer skip on the device
/// (PyTorch's fused optimizers do the same) and keeps the scale, its inverse and the growth
/// tracker there, where the next step's loss and unscale read them. The host reads them only
/// when asked ([`GradScaler::get_scale`], [`GradScaler::state`], and [`GradScaler::settle`],
/// which the trainer calls at each read-back of the losses, at the end of an epoch and before a
/// checkpoint). [`GradScaler::update`] is the host's decision instead, for a manual step that
/// reads the check itself.
#[derive(Clone, Debug)]
pub struct GradScaler {
    /// As of the last [`GradScaler::settle`] (or host decision); the device's is ahead of it.
    state: GradScalerState,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: u64,
    /// The state on the device ([`SCALER_STATE`] f32: the scale, its inverse, the tracker, the
    /// steps skipped since it was made), ahead of `state`; `None` until [`GradScaler::step`]
    /// makes it, and after a host decision.
    device_state: Option<Tensor>,
    /// `state.skipped` when the device state was made (its own count starts at 0).
    skipped_before: u64,
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

/// `a * b` as an f32 scale on the device computes it: the device's scale and the host's
/// agree bit for bit.
fn times(a: f64, b: f64) -> f64 {
    (a as f32 * b as f32) as f64
}

impl GradScaler {
    /// PyTorch's defaults: scale 2^16, growth x2 after 2000 good steps, backoff x0.5.
    pub fn new() -> GradScaler {
        GradScaler::with_scale(65536.0)
    }

    /// The defaults with another initial scale.
    pub fn with_scale(scale: f64) -> GradScaler {
        GradScaler {
            state: GradScalerState { scale, growth_tracker: 0, skipped: 0 },
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            device_state: None,
            skipped_before: 0,
        }
    }

    /// The current scale (PyTorch's `get_scale`): read from the device where a step has left it
    /// there, which waits for the work recorded so far.
    pub fn get_scale(&self) -> f64 {
        self.current().scale
    }

    /// Steps skipped so far because a gradient overflowed (read as [`GradScaler::get_scale`]).
    pub fn skipped_steps(&self) -> u64 {
        self.current().skipped
    }

    /// The state as the device holds it, or the host's where there is none or it cannot be read
    /// (a device fault, which the next wait reports).
    fn current(&self) -> GradScalerState {
        match &self.device_state {
            Some(device) => device.to_vec_f64().ok().map_or_else(|| self.state.clone(), |v| self.read_device(&v)),
            None => self.state.clone(),
        }
    }

    /// The state from the device's values ([`SCALER_STATE`]).
    fn read_device(&self, v: &[f64]) -> GradScalerState {
        GradScalerState { scale: v[0], growth_tracker: v[2] as u64, skipped: self.skipped_before + v[3] as u64 }
    }

    /// The scale on the device, where the device state is `loss`'s device.
    fn device_scale(&self, loss: &Tensor) -> Result<Option<Tensor>> {
        match &self.device_state {
            Some(s) if s.device() == loss.device() => Ok(Some(s.narrow(0, 0, 1)?)),
            _ => Ok(None),
        }
    }

    /// `loss * scale`, to call backward on: the scale on the device once a step has made it.
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor> {
        if let Some(s) = self.device_scale(loss)? {
            return Ok(loss.mul(&s.to_dtype(loss.dtype())?)?);
        }
        match &self.device_state {
            // Another device's loss: the scale read back.
            Some(s) => Ok(loss.mul_scalar(s.narrow(0, 0, 1)?.item_f64()?)?),
            None => Ok(loss.mul_scalar(self.state.scale)?),
        }
    }

    /// `scale(loss).backward()` without the product: backward starts from the scale itself,
    /// which is the product's gradient with respect to `loss` (the same values, two kernels
    /// and a fill fewer a step). Falls back to that composite where the scale is not a device
    /// tensor of the loss's device and dtype, or the loss has more than one element.
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        match self.device_scale(loss)? {
            Some(s) if s.dtype() == loss.dtype() && loss.numel() == 1 && loss.requires_grad() => Ok(loss.backward_with(&s.reshape(loss.shape())?, false)?),
            _ => Ok(self.scale(loss)?.backward()?),
        }
    }

    /// Reads the state on the device (waiting for the last [`GradScaler::step`]) into the
    /// host's: the scale, its tracker and the skipped count up to date. An error when the scale
    /// has fallen to zero or is no longer finite: every step overflowed.
    pub fn settle(&mut self) -> Result<()> {
        let Some(device) = &self.device_state else { return Ok(()) };
        let st = self.read_device(&device.to_vec_f64()?);
        if !(st.scale > 0.0 && st.scale.is_finite()) {
            return Err(Error::InvalidArgument {
                op: "GradScaler",
                what: format!("the loss scale fell to {}: every step overflows; the loss itself is not finite, lower the learning rate", st.scale),
            });
        }
        self.state = st;
        Ok(())
    }

    /// The state after a step whose check read `flag`: 0 when every gradient was finite.
    fn next(&self, flag: f64) -> Result<GradScalerState> {
        let mut st = self.state.clone();
        if flag != 0.0 {
            st.scale = times(st.scale, self.backoff_factor);
            st.growth_tracker = 0;
            st.skipped += 1;
            if st.scale.is_nan() || st.scale <= 0.0 || !st.scale.is_finite() {
                return Err(Error::InvalidArgument {
                    op: "GradScaler",
                    what: format!("the loss scale fell to {}: every step overflows; the loss itself is not finite, lower the learning rate", st.scale),
                });
            }
            return Ok(st);
        }
        st.growth_tracker += 1;
        if st.growth_tracker >= self.growth_interval {
            st.scale = times(st.scale, self.growth_factor);
            st.growth_tracker = 0;
        }
        Ok(st)
    }

    /// Divides every gradient of `params` by the scale and returns [`nonfinite_flag`] of the
    /// result (0 when all are finite, NaN otherwise; a 0 when none has a gradient).
    ///
    /// Where the device has the kernel, both are one multi-tensor op over the f32 gradients
    /// (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`: a launch or so), reading the
    /// inverse scale on the device. Otherwise the gradients are multiplied by that inverse
    /// with tensor ops, or before the first step by the host's: one multi-tensor scale update
    /// (`optim/fused`) where the device has one, else a kernel per gradient (the gradients stay
    /// buffers of their own, as the optimizers' multi-tensor kernels want them); then they are
    /// checked joined ([`nonfinite_flag`]).
    pub fn unscale_(&mut self, params: &[Tensor]) -> Result<Tensor> {
        let _no_grad = NoGradGuard::new();
        let held: Vec<(&Tensor, Tensor)> = params.iter().filter_map(|p| p.grad().map(|g| (p, g))).collect();
        let grads: Vec<Tensor> = held.iter().map(|(_, g)| g.clone()).collect();
        let on_device = self.device_state.as_ref().filter(|s| grads.iter().all(|g| g.device() == s.device()));
        if let Some(state) = on_device {
            if let Some(flag) = unscale_check(0.0, Some(state), &grads)? {
                return Ok(flag);
            }
            // The inverse as `mul_scalar` takes a factor: rounded to the gradient's dtype.
            let inv = state.narrow(0, 1, 1)?;
            for (p, g) in &held {
                p.set_grad(Some(g.mul(&inv.to_dtype(g.dtype())?)?));
            }
            return self.flag(params);
        }
        self.settle()?;
        let inv = 1.0 / self.state.scale;
        if let Some(flag) = unscale_check(inv, None, &grads)? {
            return Ok(flag);
        }
        let op = Scale(inv);
        let lists: Vec<Vec<&Tensor>> = grads.iter().map(|g| vec![g]).collect();
        let ran = update_foreach(&op, &lists)?;
        for ((p, g), ran) in held.iter().zip(ran) {
            if !ran && update(&op, &[g]).transpose()?.is_none() {
                p.set_grad(Some(g.mul_scalar(inv)?));
            }
        }
        self.flag(params)
    }

    /// [`nonfinite_flag`] of `params`, or a 0 when none has a gradient.
    fn flag(&self, params: &[Tensor]) -> Result<Tensor> {
        match nonfinite_flag(params)? {
            Some(flag) => Ok(flag),
            None => {
                let device = params.first().map_or_else(liandan_nn::Device::cpu, |p| p.device().clone());
                Ok(Tensor::scalar(0.0, DType::F32, &device)?)
            }
        }
    }

    /// The optimizer's step, unless `flag` ([`GradScaler::unscale_`]'s) is not zero, then the
    /// scale for the next step (`scaler.step(optimizer)` and `scaler.update()` in PyTorch).
    /// Both are decided on the device where the optimizer can skip there
    /// ([`Optimizer::step_unless_nonfinite`]): nothing waits for the flag.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer, flag: &Tensor) -> Result<()> {
        optimizer.step_unless_nonfinite(flag)?;
        let _no_grad = NoGradGuard::new();
        let current = match &self.device_state {
            Some(s) if s.device() == flag.device() => s.clone(),
            _ => {
                self.settle()?;
                self.skipped_before = self.state.skipped;
                let st = &self.state;
                // The inverse as the host's unscale computes it, rounded to f32.
                let values = [st.scale, 1.0 / st.scale, st.growth_tracker as f64, 0.0];
                Tensor::from_f64s(&values, &[SCALER_STATE], DType::F32, flag.device())?
            }
        };
        let op = NextScale {
            growth: self.growth_factor,
            backoff: self.backoff_factor,
            inv_growth: 1.0 / self.growth_factor,
            inv_backoff: 1.0 / self.backoff_factor,
            interval: self.growth_interval,
        };
        self.device_state = liandan_tensor::fused::run_or_composite(&op, &[&current, flag])?.pop();
        Ok(())
    }

    /// Takes the read-back flag of [`GradScaler::unscale_`] and returns whether the optimizer
    /// should step: `false` (and the scale backed off) when it is not zero. The host's
    /// decision, where [`GradScaler::step`] leaves it to the device.
    pub fn update(&mut self, flag: f64) -> Result<bool> {
        self.settle()?;
        self.state = self.next(flag)?;
        self.device_state = None;
        Ok(flag == 0.0)
    }

    /// [`GradScaler::unscale_`], its flag read back (the one read-back of a step), then
    /// [`GradScaler::update`]: whether the optimizer should step.
    pub fn unscale_and_update(&mut self, params: &[Tensor]) -> Result<bool> {
        let flag = self.unscale_(params)?.item_f64()?;
        self.update(flag)
    }

    /// The state to save with a checkpoint (read as [`GradScaler::get_scale`];
    /// [`GradScaler::settle`] first also checks it).
    pub fn state(&self) -> GradScalerState {
        self.current()
    }

    /// Restores a saved state; a scale that is not a positive finite number is an error.
    pub fn load_state(&mut self, state: &GradScalerState) -> Result<()> {
        if !(state.scale > 0.0 && state.scale.is_finite()) {
            return Err(Error::State { op: "GradScaler", detail: format!("the saved loss scale {} is not a positive finite number", state.scale) });
        }
        self.state = state.clone();
        self.device_state = None;
        Ok(())
    }
}
