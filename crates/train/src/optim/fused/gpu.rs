//! The update kernels on the wgpu backend, through its custom-kernel API: one dispatch per
//! parameter tensor ([`update`]), reading the parameter, its gradient and its state once and
//! writing their new values to fresh buffers; or up to [`WIDE`] tensors a dispatch
//! ([`update_foreach`]). One pipeline per rule, option set (amsgrad, momentum, centered),
//! dtype and width; everything that varies per step (lr, bias corrections) rides in the
//! parameter block, each rule's `shader_params!` struct.
//!
//! Many tensors a dispatch, why: a step over ResNet-18's 62 parameter tensors was 62 dependent
//! dispatches, and on an H200 each costs ~6.7 us of launch and barrier and ~3 us of host
//! recording, more than the update's own work for all but the largest tensors (PyTorch's
//! foreach step took a third of ours). How: the kernel binds several tensors' buffers at once,
//! one set of bindings per tensor, and a table in the parameter block maps each workgroup to a
//! tensor and to [`PER_GROUP`] of its elements. Its WGSL is the per-tensor update's files repeated once
//! per tensor slot, each copy's names suffixed and its bindings moved past the previous copy's
//! ([`super::wgsl`]), so every tensor runs the per-tensor kernel's own text and the results
//! agree bit for bit.
//!
//! Why not arrays of buffers (`binding_array`, one set of bindings for all tensors): wgpu 30
//! offers them on Vulkan only, and only where the driver has every descriptor-indexing
//! feature, which the lavapipe that CI tests on does not; plain bindings run on every
//! backend. How many tensors a dispatch: at most [`WIDE`], as many as the table fits in the
//! parameter block after the longest header (Adam's 16 words: no upload per step); where the
//! device allows fewer storage buffers per shader than that needs, a narrow variant fits
//! Metal's 29 (`NARROW_BUFFERS`); below that, the per-tensor kernels run. ResNet-18's SGD step
//! is 3 dispatches wide (an H200), 13 narrow (lavapipe, Metal).
//!
//! Where the tensors' buffers are theirs alone, a variant of each kernel writes over its
//! inputs: [`in_place`] makes it from the same text, each output binding folded into its
//! input's. A training step then allocates nothing and binds the same parameter and state
//! buffers every time, so its bind groups come from the cache (a wide SGD dispatch binds 120
//! buffers; making that bind group cost ~85 us of host time, more than the update itself).
//! Otherwise a call's fresh output buffers are all held until `update_foreach` swaps them in,
//! so a step holds up to `FOREACH_LISTS` (24) tensors' worth of new buffers beside the old,
//! where the per-tensor kernels held one tensor's.

use std::sync::Arc;

use liandan_backend_wgpu::{grid, shader_params, Shader, ShaderParams, WgpuBackend, WgpuStorage, WORKGROUP};
use liandan_tensor::{DType, Result, Storage, Strided};

use super::wgsl::{foreach_source, in_place, Trailing};
use super::FOREACH_LISTS;

/// The helpers every update reads its parameters and rounds through.
pub(crate) const HELPERS: &str = include_str!("../shaders/optim.wgsl");
/// The gradient as the optimizers (all but Adam, which reads its own) take it.
pub(crate) const GRADIENT: &str = include_str!("../shaders/gradient.wgsl");
const ONE: &str = include_str!("../shaders/one.wgsl");
const SCALE: &str = include_str!("../shaders/scale.wgsl");
const UNSCALE_CHECK: &str = include_str!("../shaders/unscale_check.wgsl");
const NEXT_SCALE: &str = include_str!("../shaders/next_scale.wgsl");

/// One update kernel, as a rule describes it ([`super::Kernels::gpu`]).
pub(crate) struct Update<P> {
    /// The op's name, which keys its pipelines.
    pub(crate) name: &'static str,
    /// The inputs every step has (the parameter, its gradient where it has one, the state that
    /// is always kept), and how many of them have an output (all but the gradient).
    pub(crate) fixed: usize,
    pub(crate) fixed_outputs: usize,
    /// The optional state present: `stateful` (Adam's amsgrad maximum, a momentum buffer)
    /// and `centered` (RMSprop's gradient average), each an input and an output after the
    /// fixed ones, in that order.
    pub(crate) stateful: bool,
    pub(crate) centered: bool,
    /// The input offsets the parameter block names, the optional ones included.
    pub(crate) slots: usize,
    /// The WGSL files after [`HELPERS`], the one with `update(e)` first, then the option parts.
    pub(crate) parts: Vec<&'static str>,
    /// `const` declarations the parts read.
    pub(crate) consts: Vec<(&'static str, u32)>,
    /// The parameter block for `n` (elements; the multi-tensor kernel's workgroups) and the
    /// offset of every slot (0 for an absent optional input).
    pub(crate) params: MakeParams<P>,
}

/// Makes an update's parameter block (see [`Update::params`]).
pub(crate) type MakeParams<P> = Box<dyn Fn(u32, &[u32]) -> P>;

impl<P> Update<P> {
    /// The inputs of one update: the fixed ones and the optional state present.
    fn inputs(&self) -> usize {
        self.fixed + self.stateful as usize + self.centered as usize
    }

    /// The buffers one tensor's update binds: each input, and an output for each but the
    /// gradient (in place: each input only).
    fn bindings(&self, in_place: bool) -> usize {
        let optional = self.stateful as usize + self.centered as usize;
        if in_place {
            self.inputs()
        } else {
            self.inputs() + self.fixed_outputs + optional
        }
    }

    /// Its pipeline's variant number: the dtype, the options, and (many tensors a dispatch)
    /// the width, whether it writes in place and what it binds after the tensors.
    fn variant(&self, dtype: DType, width: usize, in_place: bool, trailing: Trailing) -> u64 {
        let d = DType::ALL.iter().position(|&t| t == dtype).unwrap_or(0) as u64;
        d | (self.stateful as u64) << 4 | (self.centered as u64) << 5 | (in_place as u64) << 6 | (trailing as u64) << 7 | (width as u64) << 10
    }

    /// The WGSL of the one-tensor kernel, or of the `width`-wide one (`trailing`: see
    /// [`Trailer`]).
    fn source(&self, shader: Shader, dtype: DType, width: usize, in_place: bool, trailing: Trailing) -> String
    where
        P: ShaderParams,
    {
        let shader = self.consts.iter().fold(shader.ty("x", dtype), |s, (name, value)| s.uint(name, *value));
        if width == 0 {
            return self.parts.iter().fold(shader.params::<P>().part(HELPERS), |s, p| s.part(p)).part(ONE).build();
        }
        let body = [&[HELPERS], &self.parts[..]].concat().join("\n");
        let body = if in_place { self::in_place(&body) } else { body };
        foreach_source(shader.params::<Foreach<P>>(), &body, width, self.bindings(in_place), trailing)
    }
}

/// What a multi-tensor dispatch binds after every tensor slot's buffers ([`update_foreach`]).
pub(crate) enum Trailer<'a> {
    Nothing,
    /// The loss scaler's one-element f32 flag, read first by every workgroup, which does
    /// nothing unless it is zero: the scaler's skip, decided on the device. In place only (a
    /// fresh output left unwritten would be garbage).
    Gate(Strided<'a>),
    /// [`Trailer::Gate`], then the last step's gate, the kernel running only where the device
    /// ran that step (`true`) or only where it skipped it (`false`): an update recorded before
    /// the host has read whether the last step ran is recorded both ways, and one runs.
    GateAfter(Strided<'a>, Strided<'a>, bool),
    /// A fresh one-element f32 flag, zeroed, then marked NaN by any update whose stored value
    /// is not finite ([`unscale_check`]); returned after the outputs. f32 only.
    Check,
    /// [`Trailer::Check`] with the factor read on the device: the loss scaler's state
    /// ([`super::SCALER_STATE`] f32), whose element 1 is the inverse scale, bound before the flag.
    ScaledCheck(Strided<'a>),
}

impl Trailer<'_> {
    fn kind(&self) -> Trailing {
        match self {
            Trailer::Nothing => Trailing::Nothing,
            Trailer::Gate(_) => Trailing::Gate,
            Trailer::GateAfter(_, _, true) => Trailing::GateAfterRan,
            Trailer::GateAfter(_, _, false) => Trailing::GateAfterSkipped,
            Trailer::Check => Trailing::Check,
            Trailer::ScaledCheck(_) => Trailing::ScaledCheck,
        }
    }
}

shader_params! {
    /// `scale.wgsl`'s parameters.
    pub(crate) struct ScaleParams {
        pub(crate) n: u32,
        /// Read by no kernel: the helpers every update shares read it.
        pub(crate) flags: u32,
        pub(crate) values_at: u32,
        pub(crate) factor: f32,
    }
}

/// The loss scaler's [`super::Scale`] by `factor`.
pub(crate) fn scale(factor: f64) -> Update<ScaleParams> {
    let params = Box::new(move |n, at: &[u32]| ScaleParams { n, flags: 0, values_at: at[0], factor: factor as f32 });
    Update { name: "scale", fixed: 1, fixed_outputs: 1, stateful: false, centered: false, slots: 1, parts: vec![SCALE], consts: Vec::new(), params }
}

/// The loss scaler's unscale and check: [`scale`]'s product, and the check marked where a
/// stored value is not finite (with [`Trailer::Check`], f32 only).
pub(crate) fn unscale_check(factor: f64) -> Update<ScaleParams> {
    Update { name: "unscale_check", parts: vec![UNSCALE_CHECK], ..scale(factor) }
}

shader_params! {
    /// `next_scale.wgsl`'s parameters.
    pub(crate) struct NextScaleParams {
        pub(crate) growth: f32,
        pub(crate) backoff: f32,
        pub(crate) inv_growth: f32,
        pub(crate) inv_backoff: f32,
        /// Good steps to a growth, as an f32 (exact to 2^24).
        pub(crate) interval: f32,
    }
}

/// The WGSL of [`super::NextScale`]'s kernel.
fn next_scale_source(shader: Shader) -> String {
    shader.params::<NextScaleParams>().part(NEXT_SCALE).build()
}

/// [`super::NextScale`] as one invocation: `inputs` are the state ([`super::SCALER_STATE`]
/// f32) and the check (one f32), each at the start of its buffer (else `None`, and the
/// composite runs).
pub(crate) fn next_scale(gpu: &WgpuBackend, params: NextScaleParams, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
    let whole = |v: &Strided, n: usize| {
        v.dtype == DType::F32 && v.layout.numel() == n && v.layout.is_contiguous() && v.layout.offset() == 0 && !WgpuBackend::is_packed(v)
    };
    if inputs.len() != 2 || !whole(&inputs[0], super::SCALER_STATE) || !whole(&inputs[1], 1) {
        return None;
    }
    Some((|| {
        let pipeline = gpu.pipeline("next_scale", 0, next_scale_source)?;
        let out = gpu.alloc(DType::F32, super::SCALER_STATE)?;
        gpu.dispatch(&pipeline, &params, &[WgpuStorage::of(&inputs[0]), WgpuStorage::of(&inputs[1]), &out], (1, 1, 1))?;
        Ok(vec![Arc::new(out) as Storage])
    })())
}

/// Runs an update as one dispatch, or `None` where the op's composite runs instead (f64, which
/// the composite runs at full precision; buffers beyond one binding; the wrong operands).
pub(crate) fn update<P: ShaderParams>(gpu: &WgpuBackend, u: &Update<P>, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
    let first = inputs.first()?;
    let (dtype, numel) = (first.dtype, first.layout.numel());
    if !gpu.computes(dtype) || dtype == DType::F64 || inputs.len() != u.inputs() {
        return None;
    }
    gpu.widened(inputs, |inputs| {
        match gpu.fits(dtype, &[numel], inputs) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
        }
        // Offsets of every input slot the kernel names, in slot order (an absent optional one
        // reads as 0): the fixed inputs, then the optional state in the order it comes.
        let mut offsets = Vec::with_capacity(u.slots);
        let mut optional = inputs[u.fixed..].iter();
        let present = [u.stateful, u.centered];
        for k in 0..u.slots {
            let input = if k < u.fixed {
                inputs.get(k)
            } else if present.get(k - u.fixed).copied().unwrap_or(false) {
                optional.next()
            } else {
                None
            };
            offsets.push(input.map_or(Some(0), |v| u32::try_from(v.layout.offset()).ok())?);
        }
        let params = (u.params)(numel as u32, &offsets);
        Some((|| {
            let pipeline = gpu.pipeline(u.name, u.variant(dtype, 0, false, Trailing::Nothing), |s| u.source(s, dtype, 0, false, Trailing::Nothing))?;
            let outputs = u.fixed_outputs + u.stateful as usize + u.centered as usize;
            let outs = (0..outputs).map(|_| gpu.alloc(dtype, numel)).collect::<Result<Vec<_>>>()?;
            // Bindings: the fixed inputs, their outputs (all but the gradient's), then each
            // optional state's input and output (so an option's WGSL part adds its two last).
            let mut buffers: Vec<&WgpuStorage> = inputs[..u.fixed].iter().map(WgpuStorage::of).collect();
            buffers.extend(&outs[..u.fixed_outputs]);
            for (input, out) in inputs[u.fixed..].iter().zip(&outs[u.fixed_outputs..]) {
                buffers.push(WgpuStorage::of(input));
                buffers.push(out);
            }
            gpu.dispatch(&pipeline, &params, &buffers, grid(numel))?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    })
}

/// Elements a workgroup of the multi-tensor kernel updates (`shaders/foreach.wgsl`).
const PER_GROUP: usize = 4 * WORKGROUP;

/// Entries of the multi-tensor kernel's table, 2 words a tensor (its first workgroup, its
/// element count), after the longest header (Adam's 16 words) in a dispatch's parameter block.
const TABLE: usize = 2 * WIDE;

/// Tensors a dispatch updates at most: the table's room, which is also what a call is handed
/// at most (`FOREACH_LISTS`), so the call is one dispatch.
pub(crate) const WIDE: usize = {
    let room = (liandan_backend_wgpu::params::PARAMS_BYTES / 4 - 16) / 2;
    if room < FOREACH_LISTS {
        room
    } else {
        FOREACH_LISTS
    }
};

/// Storage buffers a shader may bind on every adapter the narrow variant is for (Metal's 31
/// buffer slots, less the two wgpu keeps); lavapipe allows 32.
const NARROW_BUFFERS: usize = 29;

/// The multi-tensor kernel's parameter block: the one-tensor kernel's (`n` counting
/// workgroups, every offset 0) and the table (see [`TABLE`]; entries past the last tensor
/// start at `u32::MAX`, so the search stops before them).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Foreach<P> {
    head: P,
    table: [u32; TABLE],
}

// SAFETY: both fields are Pod; `P` is a block of 4-byte fields (`shader_params!` checks it),
// so it ends on a 4-byte boundary and the `u32` table follows it with no padding, and the
// struct has none at its end.
unsafe impl<P: ShaderParams> bytemuck::Zeroable for Foreach<P> {}
unsafe impl<P: ShaderParams> bytemuck::Pod for Foreach<P> {}

impl<P: ShaderParams> ShaderParams for Foreach<P> {
    fn fields() -> Vec<(&'static str, String)> {
        P::fields().into_iter().chain([("table", format!("array<u32, {TABLE}>"))]).collect()
    }
}

/// The widths (tensors a dispatch) built for an update binding `bindings` buffers per tensor,
/// narrowest first: the narrow one, and [`WIDE`] where that is wider (an update of one binding
/// fits [`WIDE`] tensors in the narrow budget already).
pub(crate) fn widths(bindings: usize) -> Vec<usize> {
    let narrow = ((NARROW_BUFFERS - 1) / bindings).min(WIDE);
    if narrow < WIDE {
        vec![narrow, WIDE]
    } else {
        vec![WIDE]
    }
}

/// Runs an update over many tensors (`lists[i]`: one update's inputs), a chunk of tensors a
/// dispatch, writing fresh outputs (one list of them per update, in order) or, `in_place`,
/// over the updated inputs' buffers (none returned), with `trailer` bound after every
/// tensor's buffers (its flag, for [`Trailer::Check`] and [`Trailer::ScaledCheck`], returned last). `None` where the
/// per-tensor kernels run instead: f64, a device that allows too few bindings, an operand not
/// at the start of its buffer or larger than a binding, packed bf16 in place, a trailer its
/// kind does not take.
pub(crate) fn update_foreach<P: ShaderParams>(
    gpu: &WgpuBackend,
    u: &Update<P>,
    lists: &[Vec<Strided>],
    in_place: bool,
    trailer: Trailer,
) -> Option<Result<Vec<Storage>>> {
    let dtype = lists.first()?.first()?.dtype;
    let packed = lists.iter().flatten().any(WgpuBackend::is_packed);
    if !gpu.computes(dtype) || dtype == DType::F64 || (in_place && packed) {
        // Writing over a packed buffer in place would need the words packed back.
        return None;
    }
    let trailing = trailer.kind();
    let whole = |g: &Strided, n: usize| {
        g.dtype == DType::F32 && g.layout.numel() == n && g.layout.is_contiguous() && g.layout.offset() == 0 && !WgpuBackend::is_packed(g)
    };
    let gate: Vec<&WgpuStorage> = match trailer {
        Trailer::Gate(g) if !in_place || !whole(&g, 1) => return None,
        Trailer::Gate(g) => vec![WgpuStorage::of(&g)],
        Trailer::GateAfter(g, last, _) if !in_place || !whole(&g, 1) || !whole(&last, 1) => return None,
        Trailer::GateAfter(g, last, _) => vec![WgpuStorage::of(&g), WgpuStorage::of(&last)],
        Trailer::Check | Trailer::ScaledCheck(_) if dtype != DType::F32 => return None,
        Trailer::ScaledCheck(g) if !whole(&g, super::SCALER_STATE) => return None,
        Trailer::ScaledCheck(g) => vec![WgpuStorage::of(&g)],
        _ => Vec::new(),
    };
    let all: Vec<Strided> = lists.iter().flatten().copied().collect();
    gpu.widened(&all, |all| {
        let lists: Vec<&[Strided]> = all.chunks(u.inputs()).collect();
        let buffers_allowed = gpu.max_bindings().ok()?;
        // The parameter block takes one of the buffers, the trailer the rest.
        let fixed = 1
            + usize::from(trailing != Trailing::Nothing)
            + usize::from(matches!(trailing, Trailing::ScaledCheck | Trailing::GateAfterRan | Trailing::GateAfterSkipped));
        // The widest built width that fits, else as many tensors as fit (Metal's budget with
        // two gates after a narrow width's tensors).
        let most = buffers_allowed.saturating_sub(fixed) / u.bindings(in_place);
        let width = widths(u.bindings(in_place)).into_iter().rev().find(|&w| w <= most).or(Some(most)).filter(|&w| w >= 2)?;
        let fits = |list: &&[Strided]| {
            let numel = list[0].layout.numel();
            let operands = list.iter().all(|v| v.dtype == dtype && v.layout.offset() == 0);
            list.len() == u.inputs() && operands && gpu.fits(dtype, &[numel], list).unwrap_or(false)
        };
        if !lists.iter().all(fits) {
            return None;
        }
        Some((|| {
            let pipeline = gpu.pipeline(u.name, u.variant(dtype, width, in_place, trailing), |s| u.source(s, dtype, width, in_place, trailing))?;
            let check = if matches!(trailing, Trailing::Check | Trailing::ScaledCheck) { Some(gpu.alloc_zeroed(DType::F32, 1)?) } else { None };
            let mut all = Vec::new();
            for chunk in lists.chunks(width) {
                let mut table = [0u32; TABLE];
                let mut groups = 0usize;
                for (k, entry) in table.chunks_mut(2).take(width).enumerate() {
                    match chunk.get(k) {
                        Some(list) => {
                            let numel = list[0].layout.numel();
                            entry.copy_from_slice(&[groups as u32, numel as u32]);
                            groups += numel.div_ceil(PER_GROUP);
                        }
                        None => entry[0] = u32::MAX,
                    }
                }
                let groups_word = u32::try_from(groups).ok().filter(|&g| g < u32::MAX);
                let Some(groups_word) = groups_word else {
                    return Err(liandan_tensor::Error::Device(format!("{}: too many workgroups for one dispatch", u.name)));
                };
                let params = Foreach { head: (u.params)(groups_word, &vec![0; u.slots]), table };
                let outputs = u.fixed_outputs + u.stateful as usize + u.centered as usize;
                let fresh = |list: &&[Strided]| (0..outputs).map(|_| gpu.alloc(dtype, list[0].layout.numel())).collect::<Result<Vec<_>>>();
                let outs = if in_place { Vec::new() } else { chunk.iter().map(fresh).collect::<Result<Vec<_>>>()? };
                // Per tensor slot, the per-tensor kernel's bindings: the fixed inputs, their
                // outputs (all but the gradient's), then each optional state's input and
                // output; in place, the inputs alone. Slots past the chunk bind its first
                // tensor again (never run).
                let mut buffers: Vec<&WgpuStorage> = Vec::with_capacity(width * u.bindings(in_place));
                for k in 0..width {
                    let k = if k < chunk.len() { k } else { 0 };
                    if in_place {
                        buffers.extend(chunk[k].iter().map(WgpuStorage::of));
                        continue;
                    }
                    let (list, out) = (&chunk[k], &outs[k]);
                    buffers.extend(list[..u.fixed].iter().map(WgpuStorage::of));
                    buffers.extend(&out[..u.fixed_outputs]);
                    for (input, o) in list[u.fixed..].iter().zip(&out[u.fixed_outputs..]) {
                        buffers.push(WgpuStorage::of(input));
                        buffers.push(o);
                    }
                }
                buffers.extend(&gate);
                buffers.extend(&check);
                gpu.dispatch(&pipeline, &params, &buffers, grid(groups * WORKGROUP))?;
                drop(buffers);
                all.extend(outs.into_iter().flatten().map(|s| Arc::new(s) as Storage));
            }
            all.extend(check.map(|c| Arc::new(c) as Storage));
            Ok(all)
        })())
    })
}

#[cfg(test)]
mod tests {
    use liandan_backend_wgpu::{shaders, ShaderParams};
    use liandan_tensor::DType;

    use super::super::{Kernels, Step};
    use super::{next_scale_source, scale, unscale_check, widths, Trailing, Update, WIDE};
    use crate::optim::{AdadeltaConfig, AdagradConfig, AdamConfig, RmsPropConfig, SgdConfig};

    /// Every variant of `u` (dtypes, one tensor, narrow and wide, fresh and in place, gated)
    /// on a device with f16 and f64, one with neither, and Metal (f16, immediates): naga
    /// validates it and translates it to SPIR-V, and to MSL without f64, as the wgpu backend's
    /// own kernels are checked (its `tests/shaders.rs`).
    fn check_all<P: ShaderParams>(u: &Update<P>) {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let wide = |in_place: bool, trailing: Trailing| widths(u.bindings(in_place)).into_iter().map(move |w| (w, in_place, trailing));
            let variants = std::iter::once((0, false, Trailing::Nothing))
                .chain(wide(false, Trailing::Nothing))
                .chain(wide(true, Trailing::Nothing))
                .chain(wide(true, Trailing::Gate))
                .chain(wide(true, Trailing::GateAfterRan))
                .chain(wide(true, Trailing::GateAfterSkipped));
            check(u, dtype, variants);
        }
    }

    fn check<P: ShaderParams>(u: &Update<P>, dtype: DType, variants: impl Iterator<Item = (usize, bool, Trailing)> + Clone) {
        for (f16, f64, immediates) in [(true, true, false), (false, false, false), (true, false, true)] {
            for (width, in_place, trailing) in variants.clone() {
                let name = format!("{} {dtype} width {width} in place {in_place} {trailing:?} (f16 {f16}, f64 {f64}, immediates {immediates})", u.name);
                let src = shaders::custom_source(f16, f64, immediates, |s| u.source(s, dtype, width, in_place, trailing));
                assert!(src.contains(if immediates { "var<immediate> p: Params" } else { "var<storage, read> p: Params" }), "{name}: the parameter block");
                assert!(!src.contains("params["), "{name}: a parameter read by position");
                shaders::check(&name, &src, !f64).unwrap_or_else(|e| panic!("{e}\n{src}"));
            }
        }
    }

    fn step<R: Kernels>(rule: R) -> Step<R> {
        Step { rule, lr: 1e-2, weight_decay: 0.01, step: 3, first: false }
    }

    #[test]
    fn every_update_kernel_validates() {
        for amsgrad in [false, true] {
            check_all(&AdamConfig::gpu(&step(AdamConfig { amsgrad, ..AdamConfig::adam(1e-3) })));
        }
        for momentum in [0.0, 0.9] {
            check_all(&SgdConfig::gpu(&step(SgdConfig { momentum, ..SgdConfig::default() })));
        }
        for (momentum, centered) in [(0.0, false), (0.9, false), (0.0, true), (0.9, true)] {
            check_all(&RmsPropConfig::gpu(&step(RmsPropConfig { momentum, centered, ..RmsPropConfig::default() })));
        }
        check_all(&AdagradConfig::gpu(&step(AdagradConfig::default())));
        check_all(&AdadeltaConfig::gpu(&step(AdadeltaConfig::default())));
        check_all(&scale(0.5));
        // The unscale and check runs on f32 gradients in place, with its flag after them (and
        // the scaler's state before the flag, where the factor is read on the device).
        for trailing in [Trailing::Check, Trailing::ScaledCheck] {
            check(&unscale_check(0.5), DType::F32, widths(1).into_iter().map(move |w| (w, true, trailing)));
        }
    }

    #[test]
    fn the_next_scale_kernel_validates() {
        for (f16, f64, immediates) in [(true, true, false), (false, false, false), (true, false, true)] {
            let src = shaders::custom_source(f16, f64, immediates, next_scale_source);
            shaders::check("next_scale", &src, !f64).unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }

    #[test]
    fn the_narrow_width_fits_metal_and_the_wide_one_the_table() {
        // SGD with momentum (5 bindings a tensor) to Adam with amsgrad (9).
        assert_eq!(widths(5), [5, WIDE]);
        assert_eq!(widths(9), [3, WIDE]);
        // The loss scaler's Scale in place: one binding, one key.
        assert_eq!(widths(1), [WIDE]);
        assert_eq!(WIDE, 24);
    }
}
