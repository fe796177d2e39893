//! Fused optimizer updates: an optimizer's per-parameter step, and the loss scaler's division
//! of the gradients ([`Scale`]), each one kernel where the device has one, as custom ops
//! (`liandan_tensor::custom`). An update's composite is its rule's [`Rule::update`] (its
//! oracle and fallback); its kernels are this crate's own: each rule's CPU kernel and WGSL live
//! in the rule's file and `shaders/`, `cpu.rs` and `gpu.rs` run them (the GPU's through
//! `liandan_backend_wgpu`'s custom-kernel API).
//!
//! An update op changes its operands rather than making new values ([`UpdateOp`]): its
//! kernels keep the custom-op contract (outputs are fresh buffers, holding the new contents of
//! the inputs that [`UpdateOp::updates`] names), and [`update`] swaps each into its tensor's
//! storage, as `Tensor::assign` does. The old buffers go back to the allocator as soon as the
//! swap drops them, so a step over many parameters holds one parameter's worth of extra state
//! at a time (up to [`FOREACH_LISTS`] parameters' worth with [`update_foreach`]) and memory
//! stays flat; a kernel never writes into a buffer that a view taken earlier, or a tensor
//! saved for backward, still reads. Hyper-parameters that change per step (the lr a scheduler
//! sets, the bias corrections of the host-side step count) travel in the op's value, which a
//! GPU kernel reads from its parameter block: no read-back and no new pipeline per value.
//!
//! Many updates at once ([`update_foreach`], `foreach.rs`): a step runs one update per
//! parameter tensor, and on a GPU each is a dispatch whose launch costs more than its work
//! for all but the largest tensors. Where the device can, the whole list of a parameter
//! group's updates runs in a few dispatches instead (PyTorch's "foreach" optimizers); the
//! per-tensor updates stay the default and the oracle, and the results are theirs bit for bit.
//!
//! `LIANDAN_FUSION=0` turns every kernel here off with the others (`liandan_tensor::fused`).

mod check;
mod cpu;
mod foreach;
#[cfg(feature = "wgpu")]
pub(crate) mod gpu;
#[cfg(feature = "wgpu")]
mod wgsl;

use std::cell::Cell;
use std::sync::Arc;

use liandan_backend_cpu::kernel::Float;
use liandan_tensor::{fused, Backend, CustomKernel, CustomOp, DType, Layout, Result as TensorResult, Storage, Strided, Tensor};

pub(crate) use check::nonfinite;
pub(crate) use cpu::{acc, buffers, decay_addcmul, l2_grad, scalar, stored};
use foreach::Foreach;

use super::core::{ParamState, Rule, RunGroup};
use super::ParamGroup;
use crate::error::Result;

/// An op whose outputs are the new values of some of its inputs, which [`update`] swaps in.
pub(crate) trait UpdateOp: CustomOp + Clone + PartialEq {
    /// The inputs its outputs are the new contents of, in output order.
    fn updates(&self) -> Vec<usize>;

    /// Its GPU kernel's parameter block (a `shader_params!` struct).
    #[cfg(feature = "wgpu")]
    type Params: liandan_backend_wgpu::ShaderParams;

    /// Its GPU kernel (`gpu.rs` runs it, on one tensor or many).
    #[cfg(feature = "wgpu")]
    fn gpu(&self) -> gpu::Update<Self::Params>;
}

/// A rule's fused update kernels ([`Step`] of the rule is the op): implemented by this crate's
/// optimizers in their own files.
pub(crate) trait Kernels: Rule + PartialEq + std::fmt::Debug + Sync {
    /// The op's name (`adam_step`), which also keys its GPU pipelines.
    const OP: &'static str;

    /// The operands after the parameter and its gradient (the state tensors, made on the first
    /// step), and whether they stand in for a state the kernel writes without reading (SGD's
    /// momentum buffer on its first step).
    fn operands(&self, param: &Tensor, state: &mut ParamState) -> TensorResult<(Vec<Tensor>, bool)>;

    /// The CPU kernel over elements of `T`: `inputs` are the parameter, its gradient and the
    /// operands, one shape, contiguous; the outputs the new parameter and state.
    fn cpu<T: Float>(step: &Step<Self>, inputs: &[Strided]) -> TensorResult<Vec<Storage>>;

    /// The GPU kernel's parameter block (a `shader_params!` struct).
    #[cfg(feature = "wgpu")]
    type Params: liandan_backend_wgpu::ShaderParams;

    /// The GPU kernel (`gpu.rs` runs it).
    #[cfg(feature = "wgpu")]
    fn gpu(step: &Step<Self>) -> gpu::Update<Self::Params>;
}

/// One step of the rule `R` over one parameter tensor: the rule with its hyper-parameters,
/// the group's learning rate and weight decay, and the step's count (1 for the first). Inputs:
/// the parameter, its gradient, then the rule's state ([`Kernels::operands`]). Outputs: the
/// new parameter, then the new state.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Step<R> {
    pub(crate) rule: R,
    pub(crate) lr: f64,
    pub(crate) weight_decay: f64,
    pub(crate) step: u64,
    /// The state operands stand in for a state not yet made (see [`Kernels::operands`]).
    pub(crate) first: bool,
}

impl<R: Kernels> CustomKernel for Step<R> {
    fn name(&self) -> &'static str {
        R::OP
    }

    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<TensorResult<Vec<Storage>>> {
        if backend.downcast_ref::<liandan_backend_cpu::CpuBackend>().is_some() {
            return cpu::per_float(R::OP, inputs, |dtype| match dtype {
                DType::F32 => R::cpu::<f32>(self, inputs),
                DType::F64 => R::cpu::<f64>(self, inputs),
                DType::F16 => R::cpu::<half::f16>(self, inputs),
                _ => R::cpu::<half::bf16>(self, inputs),
            });
        }
        #[cfg(feature = "wgpu")]
        if let Some(gpu) = backend.downcast_ref::<liandan_backend_wgpu::WgpuBackend>() {
            return gpu::update(gpu, &self.gpu(), inputs);
        }
        None
    }
}

impl<R: Kernels> CustomOp for Step<R> {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        self.updates().into_iter().map(|k| (inputs[k].shape().to_vec(), inputs[k].dtype())).collect()
    }

    /// [`Rule::update`] on a detached handle of the parameter and a copy of the state: the new
    /// values, with the inputs untouched.
    fn composite(&self, inputs: &[&Tensor]) -> TensorResult<Vec<Tensor>> {
        let param = inputs[0].detach();
        let tensors = if self.first { Vec::new() } else { inputs[2..].iter().map(|t| (*t).clone()).collect() };
        let mut state = ParamState { step: self.step, tensors };
        self.rule.update(self.lr, self.weight_decay, &param, inputs[1], &mut state).map_err(|e| liandan_tensor::Error::Device(e.to_string()))?;
        Ok(std::iter::once(param).chain(state.tensors).collect())
    }
}

impl<R: Kernels> UpdateOp for Step<R> {
    fn updates(&self) -> Vec<usize> {
        // The parameter, then every state tensor (the inputs after the gradient).
        std::iter::once(0).chain(2..2 + self.rule.state_names().len()).collect()
    }

    #[cfg(feature = "wgpu")]
    type Params = R::Params;

    #[cfg(feature = "wgpu")]
    fn gpu(&self) -> gpu::Update<R::Params> {
        R::gpu(self)
    }
}

/// `x * factor` written over `x` (an update op): the loss scaler's division of every gradient
/// by the scale, which [`update_foreach`] runs over all of them in a few launches where a
/// multiply each was one launch each (PyTorch's `_foreach_mul_`). Input: `x`. Output: its new
/// values, computed as `Tensor::mul_scalar` computes them (the factor rounded to `x`'s dtype,
/// the product in f32, rounded to the dtype), its oracle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Scale(pub(crate) f64);

impl CustomKernel for Scale {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<TensorResult<Vec<Storage>>> {
        if backend.downcast_ref::<liandan_backend_cpu::CpuBackend>().is_some() {
            return cpu::per_float("scale", inputs, |dtype| match dtype {
                DType::F32 => cpu::scale::<f32>(self.0, inputs),
                DType::F64 => cpu::scale::<f64>(self.0, inputs),
                DType::F16 => cpu::scale::<half::f16>(self.0, inputs),
                _ => cpu::scale::<half::bf16>(self.0, inputs),
            });
        }
        #[cfg(feature = "wgpu")]
        if let Some(gpu) = backend.downcast_ref::<liandan_backend_wgpu::WgpuBackend>() {
            return gpu::update(gpu, &self.gpu(), inputs);
        }
        None
    }
}

impl CustomOp for Scale {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(inputs[0].shape().to_vec(), inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> TensorResult<Vec<Tensor>> {
        Ok(vec![inputs[0].mul_scalar(self.0)?])
    }
}

impl UpdateOp for Scale {
    fn updates(&self) -> Vec<usize> {
        vec![0]
    }

    #[cfg(feature = "wgpu")]
    type Params = gpu::ScaleParams;

    #[cfg(feature = "wgpu")]
    fn gpu(&self) -> gpu::Update<gpu::ScaleParams> {
        gpu::scale(self.0)
    }
}

/// The loss scaler's unscale and check as one op (PyTorch's
/// `_amp_foreach_non_finite_check_and_unscale_`): every input, a gradient, multiplied by the
/// factor in place as [`Scale`] multiplies it, and one output, a one-element f32 flag: 0 when
/// every result is finite, NaN otherwise ([`crate::amp::nonfinite_flag`]'s, the composite's
/// second half). The factor is `factor`, or with `on_device` the inverse scale in the scaler's
/// state on the device, then the last input ([`NextScale`]'s), so that nothing waits for the
/// host to learn the scale. Where the two halves were a multiply, a join, a multiply by zero, a
/// sum and a cast, the GPU's kernel is one multi-tensor dispatch per [`gpu::WIDE`] f32
/// gradients, each marking a shared flag. The caller hands over buffers nothing else holds
/// ([`unscale_check`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct UnscaleCheck {
    pub(crate) factor: f64,
    pub(crate) on_device: bool,
}

impl CustomKernel for UnscaleCheck {
    fn name(&self) -> &'static str {
        "unscale_check"
    }

    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<TensorResult<Vec<Storage>>> {
        #[cfg(feature = "wgpu")]
        if let Some(gpu) = backend.downcast_ref::<liandan_backend_wgpu::WgpuBackend>() {
            let (grads, trailer) = match (self.on_device, inputs.split_last()) {
                (true, Some((state, grads))) => (grads, gpu::Trailer::ScaledCheck(*state)),
                (true, None) => return None,
                (false, _) => (inputs, gpu::Trailer::Check),
            };
            let lists: Vec<Vec<Strided>> = grads.iter().map(|&v| vec![v]).collect();
            return gpu::update_foreach(gpu, &gpu::unscale_check(self.factor), &lists, true, trailer);
        }
        let _ = (backend, inputs);
        None
    }
}

impl CustomOp for UnscaleCheck {
    fn outputs(&self, _inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(Vec::new(), DType::F32)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> TensorResult<Vec<Tensor>> {
        let (grads, inverse) = match (self.on_device, inputs.split_last()) {
            (true, Some((state, grads))) => (grads, Some(state.narrow(0, 1, 1)?)),
            _ => (inputs, None),
        };
        for g in grads {
            // An f32 gradient times the f32 inverse: `mul_scalar`'s arithmetic.
            let scaled = match &inverse {
                Some(inv) => g.mul(inv)?,
                None => g.mul_scalar(self.factor)?,
            };
            g.assign(&scaled)?;
        }
        let grads: Vec<Tensor> = grads.iter().map(|&g| g.clone()).collect();
        Ok(nonfinite(&grads)?.into_iter().collect())
    }
}

/// [`UnscaleCheck`] over `grads` as one kernel, by `factor` or (given `state`, the scaler's
/// state on the device) by the inverse scale there: the flag, or `None` where it does not run
/// (fusion off, no kernel on the device, a gradient not f32, on another device, not
/// contiguous from the start of its buffer, or sharing its buffer with another tensor), and
/// the caller runs the two halves.
pub(crate) fn unscale_check(factor: f64, state: Option<&Tensor>, grads: &[Tensor]) -> TensorResult<Option<Tensor>> {
    let Some(first) = grads.first() else { return Ok(None) };
    if !FOREACH_ON.with(Cell::get) || state.is_some_and(|s| s.device() != first.device()) {
        return Ok(None);
    }
    // The handle `storage()` makes and the gradient's own: no other tensor sees the write.
    let alone = |g: &Tensor| Arc::strong_count(&g.storage()) == 2;
    if !grads.iter().all(|g| g.dtype() == DType::F32 && g.device() == first.device() && fits(&[g], &[0]) && alone(g)) {
        return Ok(None);
    }
    let refs: Vec<&Tensor> = grads.iter().chain(state).collect();
    match fused::run(&UnscaleCheck { factor, on_device: state.is_some() }, &refs) {
        Some(outs) => Ok(outs?.pop()),
        None => Ok(None),
    }
}

/// Elements of the loss scaler's state on the device ([`NextScale`]'s input and output): the
/// scale, its inverse (what the gradients are multiplied by), the good steps since the scale
/// last changed, and the steps skipped since the state was made; f32, every count exact to 2^24.
pub(crate) const SCALER_STATE: usize = 4;

/// The loss scaler's state after a step, from its state before (input 0, [`SCALER_STATE`] f32)
/// and the step's check (input 1, a one-element f32: 0 or -0 when every gradient was finite):
/// after a finite step the tracker counts it, and at `interval` good steps the scale is
/// multiplied by `growth` (its inverse by `inv_growth`) and the tracker starts again; after
/// any other step the scale is multiplied by `backoff` (its inverse by `inv_backoff`), the
/// tracker is 0 and the skipped count grows. Products in f32, as `Tensor::mul_scalar` computes
/// them. The host keeps nothing of it: one kernel where the composite is some twenty ops
/// (PyTorch's `_amp_update_scale_`), and nothing read back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct NextScale {
    pub(crate) growth: f64,
    pub(crate) backoff: f64,
    pub(crate) inv_growth: f64,
    pub(crate) inv_backoff: f64,
    pub(crate) interval: u64,
}

impl CustomKernel for NextScale {
    fn name(&self) -> &'static str {
        "next_scale"
    }

    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<TensorResult<Vec<Storage>>> {
        #[cfg(feature = "wgpu")]
        if let Some(gpu) = backend.downcast_ref::<liandan_backend_wgpu::WgpuBackend>() {
            let params = gpu::NextScaleParams {
                growth: self.growth as f32,
                backoff: self.backoff as f32,
                inv_growth: self.inv_growth as f32,
                inv_backoff: self.inv_backoff as f32,
                interval: self.interval.min(1 << 24) as f32,
            };
            return gpu::next_scale(gpu, params, inputs);
        }
        let _ = (backend, inputs);
        None
    }
}

impl CustomOp for NextScale {
    fn outputs(&self, _inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(vec![SCALER_STATE], DType::F32)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> TensorResult<Vec<Tensor>> {
        let (state, flag) = (inputs[0], inputs[1].reshape(&[1])?);
        let part = |k: usize| state.narrow(0, k, 1);
        let (scale, inv, tracker, skipped) = (part(0)?, part(1)?, part(2)?, part(3)?);
        let finite = flag.eq_scalar(0.0)?;
        let zero = Tensor::zeros(&[1], DType::F32, state.device())?;
        let counted = Tensor::where_cond(&finite, &tracker.add_scalar(1.0)?, &zero)?;
        let interval = self.interval.min(1 << 24) as f64;
        // At the interval only a finite step can be (a skipped one counts 0).
        let grow = Tensor::where_cond(&counted.lt_scalar(interval)?, &zero.eq_scalar(1.0)?, &finite)?;
        let step = |x: &Tensor, up: f64, down: f64| -> TensorResult<Tensor> {
            Tensor::where_cond(&finite, &Tensor::where_cond(&grow, &x.mul_scalar(up)?, x)?, &x.mul_scalar(down)?)
        };
        let next = [
            step(&scale, self.growth, self.backoff)?,
            step(&inv, self.inv_growth, self.inv_backoff)?,
            Tensor::where_cond(&grow, &zero, &counted)?,
            Tensor::where_cond(&finite, &skipped, &skipped.add_scalar(1.0)?)?,
        ];
        Ok(vec![Tensor::cat(&next.iter().collect::<Vec<_>>(), 0usize)?])
    }
}

thread_local! {
    static FOREACH_ON: Cell<bool> = const { Cell::new(true) };
}

/// Runs `f` with the multi-tensor updates (`update_foreach`) off on this thread: each update
/// runs on its own, as a per-tensor kernel where there is one. For comparing the two (`cargo
/// xtask bench-fusion`, `bench-host`); `LIANDAN_FUSION=0` turns both off.
pub fn no_foreach<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            FOREACH_ON.with(|on| on.set(self.0));
        }
    }
    let _restore = Restore(FOREACH_ON.with(|on| on.replace(false)));
    f()
}

/// Whether every operand is what an update kernel takes: contiguous, of one shape, dtype and
/// device, each updated one owning its storage from offset 0 (so its new buffer can take its
/// place).
fn fits(inputs: &[&Tensor], targets: &[usize]) -> bool {
    let Some(first) = inputs.first() else { return false };
    let same = |t: &&Tensor| t.is_contiguous() && t.shape() == first.shape() && t.dtype() == first.dtype() && t.device() == first.device();
    inputs.iter().all(same) && targets.iter().all(|&k| inputs.get(k).is_some_and(|t| t.layout().offset() == 0))
}

/// `storage` as the new contents of `t` (its shape, dtype and device).
fn swap_in(t: &Tensor, storage: Storage) -> TensorResult<()> {
    t.assign(&Tensor::from_storage(storage, Layout::contiguous(t.shape()), t.dtype(), t.device())?)
}

/// Runs the update op `op` on `inputs` where their device has a kernel for it, and swaps its
/// outputs into the inputs it updates. `None` when fusion is off, the device has no kernel,
/// or an operand is not what a kernel takes (see [`fits`]): the caller then runs its
/// composite.
pub(crate) fn update<U: UpdateOp>(op: &U, inputs: &[&Tensor]) -> Option<TensorResult<()>> {
    let targets = op.updates();
    if !fits(inputs, &targets) {
        return None;
    }
    Some(fused::kernel(op, inputs)?.and_then(|outs| {
        if outs.len() != targets.len() {
            return Err(liandan_tensor::Error::Device(format!(
                "{}: the kernel returned {} buffers for {} updated tensors",
                op.name(),
                outs.len(),
                targets.len()
            )));
        }
        targets.iter().zip(outs).try_for_each(|(&k, storage)| swap_in(inputs[k], storage))
    }))
}

/// Update lists a device is handed at once by [`update_foreach`]: its outputs are swapped in
/// before the next lists go, so a step holds at most this many tensors' new buffers beside the
/// old ones (the per-tensor updates hold one's).
pub(crate) const FOREACH_LISTS: usize = 24;

/// [`update`] of one op over many operand lists at once (`lists[i]` the inputs of one update),
/// where the device has a multi-tensor kernel for it ([`Foreach`]), [`FOREACH_LISTS`] lists a
/// call: in place where the buffers a call updates belong to their tensors alone, so that a
/// training loop's steps bind the same buffers every time and allocate none; into fresh
/// buffers swapped in where another tensor (a view, a detached alias, a graph not yet run
/// backward) shares one, which then keeps the old values. Returns, per list, whether it was
/// updated: not when fusion is off (or inside [`no_foreach`]), the device has no such kernel,
/// or the list is not what [`update`] takes or lies on another device or dtype than the first
/// list. A list not updated is unchanged, and the caller runs its update ([`update`] or the
/// composite).
pub(crate) fn update_foreach<U: UpdateOp>(op: &U, lists: &[Vec<&Tensor>]) -> TensorResult<Vec<bool>> {
    foreach_lists(op, lists, None)
}

/// [`update_foreach`] gated by the loss scaler's one-element f32 `flag` ([`crate::amp::nonfinite_flag`]):
/// each list is updated, unless the flag is not zero, by a kernel that reads the flag on the
/// device, so nothing waits for it. Only in place: a list whose buffers another tensor
/// shares, or a device without such a kernel, is left to the caller (`false`), who decides on
/// the host.
///
/// With `after` (the last step's flag, which the host has not read, and the op as it would be
/// had the device skipped that step: Adam's step count one less), each list is updated twice
/// over in place, by `op` where the last flag is zero and by the other op where it is not, so
/// that exactly one runs and nothing waits for the last step's check either.
pub(crate) fn update_foreach_gated<U: UpdateOp>(op: &U, lists: &[Vec<&Tensor>], flag: &Tensor, after: Option<(&Tensor, &U)>) -> TensorResult<Vec<bool>> {
    foreach_lists(op, lists, Some((flag, after)))
}

/// Whether the loss scaler's `flag` says to skip the step: it is not 0.0 or -0.0 (read back).
pub(crate) fn gate_closed(flag: &Tensor) -> TensorResult<bool> {
    Ok(flag.item_f64()? != 0.0)
}

/// A gate, and the last step's with the op for a skipped last step ([`update_foreach_gated`]).
type Gates<'a, U> = (&'a Tensor, Option<(&'a Tensor, &'a U)>);

fn foreach_lists<U: UpdateOp>(op: &U, lists: &[Vec<&Tensor>], gate: Option<Gates<U>>) -> TensorResult<Vec<bool>> {
    let mut done = vec![false; lists.len()];
    let targets = op.updates();
    let Some(first) = lists.first().and_then(|l| l.first()) else { return Ok(done) };
    if !liandan_tensor::fusion_enabled() || !FOREACH_ON.with(Cell::get) {
        return Ok(done);
    }
    let eligible: Vec<usize> =
        (0..lists.len()).filter(|&i| fits(&lists[i], &targets) && lists[i][0].device() == first.device() && lists[i][0].dtype() == first.dtype()).collect();
    for slice in eligible.chunks(FOREACH_LISTS) {
        let mut inputs: Vec<&Tensor> = slice.iter().flat_map(|&i| lists[i].iter().copied()).collect();
        // In place where every buffer the chunk updates is held by its tensor alone (and by the
        // handle taken here): no other tensor can see the write. Otherwise into fresh buffers.
        let alone = slice.iter().all(|&i| targets.iter().all(|&k| Arc::strong_count(&lists[i][k].storage()) == 2));
        if alone {
            let operands = lists[slice[0]].len();
            if let Some((flag, Some((last, skipped_op)))) = gate {
                inputs.extend([flag, last]);
                let ran = Foreach { op: op.clone(), operands, in_place: true, gated: true, after: Some(true) };
                let Some(result) = fused::kernel(&ran, &inputs) else { continue };
                result?;
                // The same kernel with other gates: it runs where the first one did.
                let skipped = Foreach { op: skipped_op.clone(), operands, in_place: true, gated: true, after: Some(false) };
                match fused::kernel(&skipped, &inputs) {
                    Some(result) => result?,
                    None => return Err(liandan_tensor::Error::Device(format!("{}: the update after a skipped step has no kernel", op.name()))),
                };
                slice.iter().for_each(|&i| done[i] = true);
                continue;
            }
            inputs.extend(gate.map(|g| g.0));
            let in_place = Foreach { op: op.clone(), operands, in_place: true, gated: gate.is_some(), after: None };
            if let Some(result) = fused::kernel(&in_place, &inputs) {
                result?;
                slice.iter().for_each(|&i| done[i] = true);
                continue;
            }
        }
        if gate.is_some() {
            continue;
        }
        let fresh = Foreach { op: op.clone(), operands: lists[slice[0]].len(), in_place: false, gated: false, after: None };
        let Some(outs) = fused::kernel(&fresh, &inputs) else { continue };
        let outs = outs?;
        if outs.len() != slice.len() * targets.len() {
            return Err(liandan_tensor::Error::Device(format!(
                "{}: the multi-tensor kernel returned {} buffers for {} updates",
                op.name(),
                outs.len(),
                slice.len()
            )));
        }
        drop(inputs);
        // The old buffers go back to the allocator here, before the next lists' outputs are made.
        let mut outs = outs.into_iter();
        for &i in slice {
            for &k in &targets {
                swap_in(lists[i][k], outs.next().expect("counted above"))?;
            }
            done[i] = true;
        }
    }
    Ok(done)
}

/// One update's parameter index in its group, and its operands (param, grad, state).
type Operands = (usize, Vec<Tensor>);

impl<R: Kernels> RunGroup for R {
    /// Runs the updates `pending` (`(index in the group, gradient)`) of `group` as fused update
    /// ops where the device has them: as multi-tensor ops ([`update_foreach`]), one call per
    /// distinct op (the parameters of a group normally share one: same hyper-parameters and step),
    /// then each update the device left as a per-tensor op ([`update`]). Returns which parameters
    /// were updated; the caller runs the composite ([`Rule::update`]) for the others. With a
    /// `gate`, only the multi-tensor ops gated on the device run ([`update_foreach_gated`]); with
    /// `last` too (the gate of the step before, whose count each step count here includes), each
    /// also as it would be had that step been skipped.
    fn run(
        &self,
        group: &ParamGroup,
        states: &mut [ParamState],
        pending: &[(usize, Tensor)],
        gate: Option<&Tensor>,
        last: Option<&Tensor>,
    ) -> Result<Vec<bool>> {
        let mut done = vec![false; states.len()];
        let mut batches: Vec<(Step<R>, Vec<Operands>)> = Vec::new();
        for (i, grad) in pending {
            let param = &group.params[*i].1;
            let (held, first) = self.operands(param, &mut states[*i])?;
            let op = Step { rule: self.clone(), lr: group.lr, weight_decay: group.weight_decay, step: states[*i].step, first };
            let operands: Vec<Tensor> = [param.clone(), grad.clone()].into_iter().chain(held).collect();
            match batches.iter_mut().find(|b| b.0 == op) {
                Some(batch) => batch.1.push((*i, operands)),
                None => batches.push((op, vec![(*i, operands)])),
            }
        }
        for (op, items) in batches {
            let lists: Vec<Vec<&Tensor>> = items.iter().map(|(_, operands)| operands.iter().collect()).collect();
            let skipped_op = Step { step: op.step.saturating_sub(1), ..op.clone() };
            let ran = match gate {
                Some(flag) => update_foreach_gated(&op, &lists, flag, last.map(|l| (l, &skipped_op)))?,
                None => update_foreach(&op, &lists)?,
            };
            for (((i, operands), list), ran) in items.iter().zip(&lists).zip(ran) {
                let ran = ran || (gate.is_none() && update(&op, list).transpose()?.is_some());
                if ran {
                    states[*i].tensors = operands[2..].to_vec();
                    done[*i] = true;
                }
            }
        }
        Ok(done)
    }
}
