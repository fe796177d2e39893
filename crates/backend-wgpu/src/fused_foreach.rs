//! Multi-tensor ("foreach") optimizer updates (`Backend::fused_foreach`): one dispatch updates
//! up to 24 parameter tensors with the per-tensor kernels' arithmetic (`fused_optim.rs`).
//!
//! Why: a step over ResNet-18's 62 parameter tensors was 62 dependent dispatches, and on an
//! H200 each costs ~6.7 us of launch and barrier and ~3 us of host recording, more than the
//! update's own work for all but the largest tensors (PyTorch's foreach step took a third of
//! ours). How: the kernel binds several tensors' buffers at once, one set of bindings per
//! tensor, and a table in the parameter block maps each workgroup to a tensor and to 256 of
//! its elements. Its WGSL is the per-tensor update's files repeated once per tensor slot,
//! each copy's names suffixed and its bindings moved past the previous copy's ([`source`]),
//! so every tensor runs the per-tensor kernel's own text and the results agree bit for bit.
//!
//! Why not arrays of buffers (`binding_array`, one set of bindings for all tensors): wgpu 30
//! offers them on Vulkan only, and only where the driver has every descriptor-indexing
//! feature, which the lavapipe that CI tests on does not; plain bindings run on every
//! backend. How many tensors a dispatch: at most [`WIDE`], as many as the table fits in the
//! 64-word parameter block after the 16-word header (no upload per step); where the device
//! allows fewer storage buffers per shader than that needs, a narrow variant fits Metal's 29
//! (`NARROW_BUFFERS`); below that, the per-tensor kernels run. ResNet-18's SGD step is 3
//! dispatches wide (an H200), 13 narrow (lavapipe, Metal).
//!
//! Where the tensors' buffers are theirs alone (`Backend::fused_foreach_in_place`), a variant
//! of each kernel writes over its inputs: [`in_place`] makes it from the same text, each
//! output binding folded into its input's. A training step then allocates nothing and binds
//! the same parameter and state buffers every time, so its bind groups come from the cache
//! (a wide SGD dispatch binds 120 buffers; making that bind group cost ~85 us of host time,
//! more than the update itself). Otherwise a call's fresh output buffers are all held until
//! `update_foreach` swaps them in, so a step holds up to `FOREACH_LISTS` (24) tensors' worth
//! of new buffers beside the old, where the per-tensor kernels held one tensor's.

use std::sync::Arc;

use liandan_tensor::fused::FOREACH_LISTS;
use liandan_tensor::{DType, FusedOp, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::fused_optim::{meta, Key, Meta};
use crate::gpu::META_WORDS;
use crate::kernels::{grid, Wgsl, WG};

const ENTRY: &str = include_str!("shaders/fused_optim_foreach.wgsl");

/// Where the table starts in the parameter block: after the longest header (Adam's: count,
/// flags, 5 offsets, 9 hyper-parameters).
const TABLE: usize = 16;
/// Tensors a dispatch updates at most: the table's room, 2 words per tensor, which is also
/// what a call is handed at most (`FOREACH_LISTS`), so the call is one dispatch.
pub(crate) const WIDE: usize = {
    let room = (META_WORDS - TABLE) / 2;
    if room < FOREACH_LISTS {
        room
    } else {
        FOREACH_LISTS
    }
};
/// Storage buffers a shader may bind on every adapter the narrow variant is for (Metal's 31
/// buffer slots, less the two wgpu keeps); lavapipe allows 32.
const NARROW_BUFFERS: usize = 29;

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

/// The widest of [`widths`] that `limits` allow (with the parameter block's binding), if any.
fn width(limits: &wgpu::Limits, bindings: usize) -> Option<usize> {
    // The parameter block takes one of the buffers.
    let buffers = limits.max_storage_buffers_per_shader_stage.min(limits.max_bindings_per_bind_group) as usize;
    widths(bindings).into_iter().rev().find(|&w| w >= 2 && w * bindings < buffers)
}

/// The WGSL of a `width`-wide update: `head` (types, constants, the parameter block), the
/// update's files `body` once per tensor slot (copy k: every function and binding it declares
/// named `name_k`, bindings numbered from `1 + k * bindings`), `update_at`, and the entry point.
pub(crate) fn source(head: Wgsl, body: &str, width: usize, bindings: usize) -> String {
    let names = declared(body);
    let mut s = head.uint("CHUNK", width as u32).uint("TABLE", TABLE as u32).build();
    for k in 0..width {
        let mut copy = shift_bindings(body, k * bindings);
        for name in &names {
            copy = rename(&copy, name, &format!("{name}_{k}"));
        }
        s += "\n";
        s += &copy;
    }
    s += "\n// Copy k of the update on element e.\nfn update_at(k: u32, e: u32) {\n  switch k {\n";
    for k in 0..width {
        s += &format!("    case {k}u: {{ update_{k}(e); }}\n");
    }
    s += "    default: {}\n  }\n}\n\n";
    s + ENTRY
}

/// The update's files `src` made to write over their inputs: each output binding `x_out`
/// folds into its input `x` (or `x_in`), which becomes `read_write`, and the bindings that
/// remain are numbered 1, 2, ... in the order they are declared (the input order). Every
/// update reads an element of a buffer before it writes that element, and only that one, so
/// the arithmetic is the fresh-buffer kernel's.
pub(crate) fn in_place(src: &str) -> String {
    // (read_write, name, element type) of a binding's declaration line.
    let binding = |line: &str| -> Option<(bool, String, String)> {
        let (_, rest) = line.strip_prefix("@group(0) @binding(")?.split_once(") var<storage, ")?;
        let (access, rest) = rest.split_once("> ")?;
        let (name, ty) = rest.split_once(": ")?;
        Some((access == "read_write", name.trim().to_string(), ty.to_string()))
    };
    let declared: Vec<(bool, String, String)> = src.lines().filter_map(binding).collect();
    let is_input = |n: &str| declared.iter().any(|d| !d.0 && d.1 == n);
    // (output, the input it folds into)
    let folds: Vec<(String, String)> = declared
        .iter()
        .filter(|d| d.0)
        .filter_map(|d| {
            let base = d.1.strip_suffix("_out")?;
            let input = [base.to_string(), format!("{base}_in")].into_iter().find(|n| is_input(n))?;
            Some((d.1.clone(), input))
        })
        .collect();
    let mut out = String::with_capacity(src.len());
    let mut next = 1;
    for line in src.lines() {
        match binding(line) {
            Some((_, name, _)) if folds.iter().any(|f| f.0 == name) => continue,
            Some((write, name, ty)) => {
                let access = if write || folds.iter().any(|f| f.1 == name) { "read_write" } else { "read" };
                out += &format!("@group(0) @binding({next}) var<storage, {access}> {name}: {ty}\n");
                next += 1;
            }
            None => {
                out += line;
                out += "\n";
            }
        }
    }
    folds.iter().fold(out, |s, (from, to)| rename(&s, from, to))
}

/// The functions and bindings `src` declares.
fn declared(src: &str) -> Vec<String> {
    let ident = |rest: &str| rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default().to_string();
    let mut names = Vec::new();
    for line in src.lines() {
        if let Some(rest) = line.strip_prefix("fn ") {
            names.push(ident(rest));
        } else if let Some((_, rest)) = line.strip_prefix("@group(0) @binding(").and_then(|l| l.split_once("> ")) {
            names.push(ident(rest));
        }
    }
    names
}

/// `src` with every `@binding(n)` made `@binding(n + by)`.
fn shift_bindings(src: &str, by: usize) -> String {
    if by == 0 {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("@binding(") {
        let open = at + "@binding(".len();
        let close = open + rest[open..].find(')').unwrap_or(0);
        out += &rest[..close];
        out += &format!(" + {by}u");
        rest = &rest[close..];
    }
    out + rest
}

/// `src` with the identifier `from` (where it is a whole word) replaced by `to`.
fn rename(src: &str, from: &str, to: &str) -> String {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(src.len() + 256);
    let mut rest = src;
    while let Some(at) = rest.find(from) {
        let end = at + from.len();
        let whole = !rest[..at].ends_with(is_ident) && !rest[end..].starts_with(is_ident);
        out += &rest[..at];
        out += if whole { to } else { from };
        rest = &rest[end..];
    }
    out + rest
}

impl WgpuBackend {
    /// Runs an update op over many tensors (`lists[i]`: one update's inputs), a chunk of
    /// tensors a dispatch (see the module docs), or `None` where the per-tensor kernels run
    /// instead: f64, a device that allows too few bindings, an operand not at the start of
    /// its buffer or larger than a binding.
    pub(crate) fn fused_update_foreach(&self, op: &FusedOp, lists: &[Vec<Strided>]) -> Option<Result<Vec<Vec<Storage>>>> {
        self.update_foreach(op, lists, false)
    }

    /// [`WgpuBackend::fused_update_foreach`] writing over the updated inputs' buffers
    /// (`Backend::fused_foreach_in_place`: the caller has checked that nothing else holds them).
    pub(crate) fn fused_update_foreach_in_place(&self, op: &FusedOp, lists: &[Vec<Strided>]) -> Option<Result<()>> {
        Some(self.update_foreach(op, lists, true)?.map(drop))
    }

    /// The two above: fresh outputs, one list of them per update, or (`in_place`) none.
    fn update_foreach(&self, op: &FusedOp, lists: &[Vec<Strided>], in_place: bool) -> Option<Result<Vec<Vec<Storage>>>> {
        let Meta { rule, flags, hyper, stateful, centered } = meta(op)?;
        let dtype = lists.first()?.first()?.dtype;
        if !self.repr.computes(dtype) || dtype == DType::F64 {
            return None;
        }
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let key = Key { rule, stateful, centered, dtype, width: 0, in_place };
        let (fixed, inputs) = (rule.fixed(), rule.fixed() + stateful as usize + centered as usize);
        let width = width(&gpu.limits, key.bindings())?;
        let limit = gpu.max_binding();
        let fits = |list: &Vec<Strided>| {
            let numel = list[0].layout.numel();
            let operands = list.iter().all(|v| v.dtype == dtype && v.layout.offset() == 0 && gpu_storage(v).buffer().size() <= limit);
            list.len() == inputs && operands && u32::try_from(numel).is_ok() && self.repr.buffer_bytes(dtype, numel) <= limit
        };
        if !lists.iter().all(fits) {
            return None;
        }
        Some((|| {
            let kernel = gpu.kernel(Key { width: width as u8, ..key })?;
            let mut all = Vec::with_capacity(lists.len());
            for chunk in lists.chunks(width) {
                // The per-tensor kernel's header (every offset 0), then the table.
                let mut meta = vec![0u32; TABLE + 2 * width];
                meta[1] = flags;
                meta[2 + rule.slots()..2 + rule.slots() + hyper.len()].copy_from_slice(&hyper);
                let mut groups = 0usize;
                for (k, entry) in meta[TABLE..].chunks_mut(2).enumerate() {
                    match chunk.get(k) {
                        Some(list) => {
                            let numel = list[0].layout.numel();
                            entry.copy_from_slice(&[groups as u32, numel as u32]);
                            groups += numel.div_ceil(WG);
                        }
                        None => entry[0] = u32::MAX,
                    }
                }
                meta[0] = u32::try_from(groups).ok().filter(|&g| g < u32::MAX).ok_or_else(|| gpu.err(op.name(), "too many workgroups for one dispatch"))?;
                let fresh = |list: &Vec<Strided>| (0..op.outputs()).map(|_| self.output(dtype, list[0].layout.numel())).collect::<Result<Vec<_>>>();
                let outs = if in_place { Vec::new() } else { chunk.iter().map(fresh).collect::<Result<Vec<_>>>()? };
                // Per tensor slot, the per-tensor kernel's bindings: the fixed inputs, their
                // outputs (all but the gradient's), then each optional state's input and
                // output; in place, the inputs alone. Slots past the chunk bind its first
                // tensor again (never run).
                let mut buffers: Vec<&wgpu::Buffer> = Vec::with_capacity(width * key.bindings());
                for k in 0..width {
                    let k = if k < chunk.len() { k } else { 0 };
                    if in_place {
                        buffers.extend(chunk[k].iter().map(|v| gpu_storage(v).buffer()));
                        continue;
                    }
                    let (list, out) = (&chunk[k], &outs[k]);
                    buffers.extend(list[..fixed].iter().map(|v| gpu_storage(v).buffer()));
                    let kept = rule.fixed_outputs();
                    buffers.extend(out[..kept].iter().map(|o| o.buffer()));
                    for (input, o) in list[fixed..].iter().zip(&out[kept..]) {
                        buffers.push(gpu_storage(input).buffer());
                        buffers.push(o.buffer());
                    }
                }
                gpu.dispatch(&kernel, &meta, &buffers, grid(groups * WG))?;
                drop(buffers);
                all.extend(outs.into_iter().map(|o| o.into_iter().map(|s| Arc::new(s) as Storage).collect::<Vec<_>>()));
            }
            Ok(all)
        })())
    }
}

#[cfg(test)]
mod tests {
    use super::{declared, in_place, rename, shift_bindings, widths, WIDE};

    #[test]
    fn copies_rename_whole_words_and_shift_bindings() {
        let src = "@group(0) @binding(GRAD_AVG + 1u) var<storage, read> exp_avg_sq: array<S_x>;\nfn update(e: u32) { max_exp_avg_sq[e] = exp_avg_sq[e] + params[0]; }\n";
        assert_eq!(declared(src), ["exp_avg_sq", "update"]);
        let copy = rename(&rename(&shift_bindings(src, 9), "exp_avg_sq", "exp_avg_sq_2"), "update", "update_2");
        assert_eq!(copy, "@group(0) @binding(GRAD_AVG + 1u + 9u) var<storage, read> exp_avg_sq_2: array<S_x>;\nfn update_2(e: u32) { max_exp_avg_sq[e] = exp_avg_sq_2[e] + params[0]; }\n");
    }

    #[test]
    fn in_place_folds_each_output_into_its_input_and_renumbers() {
        let src = "\
@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> sum_in: array<S_x>;
@group(0) @binding(4) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(5) var<storage, read_write> sum_out: array<S_x>;
fn update(e: u32) { sum_out[e] = sum_in[e] + grad[e]; param_out[e] = param[e] - sum_out[e]; }
@group(0) @binding(GRAD_AVG) var<storage, read> grad_avg: array<S_x>;
@group(0) @binding(GRAD_AVG + 1u) var<storage, read_write> grad_avg_out: array<S_x>;
";
        let want = "\
@group(0) @binding(1) var<storage, read_write> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read_write> sum_in: array<S_x>;
fn update(e: u32) { sum_in[e] = sum_in[e] + grad[e]; param[e] = param[e] - sum_in[e]; }
@group(0) @binding(4) var<storage, read_write> grad_avg: array<S_x>;
";
        assert_eq!(in_place(src), want);
    }

    #[test]
    fn the_narrow_width_fits_metal_and_the_wide_one_the_table() {
        // SGD with momentum (5 bindings a tensor) to Adam with amsgrad (9).
        assert_eq!(widths(5), [5, WIDE]);
        assert_eq!(widths(9), [3, WIDE]);
        // FusedOp::Scale in place: one binding, one key.
        assert_eq!(widths(1), [WIDE]);
        assert_eq!(WIDE, 24);
    }
}
