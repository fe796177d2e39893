//! Fused layer normalization (`liandan_tensor::ops::LayerNorm`, its gradient
//! `LayerNormBackward`): the forward in one dispatch (a row to a subgroup where the device's
//! subgroups have one size, else to a workgroup: its mean, its mean squared deviation, then
//! y), the backward in three (the rows' dx, as the forward's rows; then the parameters'
//! gradients as column sums over short segments of rows, joined by a workgroup a column; in
//! f32 the rows' dx may be summed into a gradient already gathered, `LayerNormBackwardInto`),
//! where the composite takes some ten ops each way and keeps three row-sized intermediates for
//! backward. Statistics are kept in f32 whatever the dtype; f64 is left to the composite.

use std::sync::Arc;

use liandan_tensor::{DType, LayerNormOptions, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl, WG};
use crate::options::RowSums;
use crate::params::words;
use crate::repr::Repr;

const SHARED: &str = include_str!("shaders/fused_layer_norm.wgsl");
const FORWARD: &str = include_str!("shaders/fused_layer_norm_forward.wgsl");
const BACKWARD: &str = include_str!("shaders/fused_layer_norm_backward.wgsl");
const BACKWARD_SUMS: &str = include_str!("shaders/fused_layer_norm_backward_sums.wgsl");
const BACKWARD_INTO: &str = include_str!("shaders/fused_layer_norm_backward_into.wgsl");
const BACKWARD_LOW: &str = include_str!("shaders/fused_layer_norm_backward_low.wgsl");
const FORWARD_LOW: &str = include_str!("shaders/fused_layer_norm_forward_low.wgsl");
const FORWARD_ADD: &str = include_str!("shaders/fused_layer_norm_forward_add.wgsl");
const FORWARD_ADD_PACKED: &str = include_str!("shaders/fused_layer_norm_forward_add_packed.wgsl");
const BACKWARD_JOIN: &str = include_str!("shaders/fused_layer_norm_backward_join.wgsl");
const TREE: &str = include_str!("shaders/fused_layer_norm_tree.wgsl");
const SUBGROUP: &str = include_str!("shaders/fused_layer_norm_subgroup.wgsl");
const ROWS: &str = include_str!("shaders/fused_layer_norm_rows.wgsl");

/// Invocations of a workgroup (the shaders' `@workgroup_size`).
const LANES: usize = 64;
/// Rows a segment of the parameters' column sums covers at least, and the most segments: short
/// segments, since each invocation walks its segment's rows one load after another.
const MIN_SEGMENT_ROWS: usize = 8;
const MAX_SEGMENTS: usize = 1024;

/// A fused layer-norm op: the forward, its gradient, or its gradient with `dx` summed into a
/// gradient gathered already (`ops::LayerNormBackwardInto`, f32 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// With a copy of y in this low dtype (f16 only, from f32) where asked.
    Forward(Option<DType>),
    /// [`Op::Forward`] of x plus an addend, the last input, writing that sum too
    /// (`ops::AddLayerNorm`, of f32 x only).
    ForwardAdd(Option<DType>),
    Backward,
    /// With a copy of dx in this low dtype (f16 only) where asked.
    BackwardInto(Option<DType>),
}

/// One pass of a fused layer normalization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pass {
    Forward,
    Backward,
    BackwardSums,
    BackwardJoin,
}

/// How a row kernel sums a row's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Sums {
    /// A workgroup a row, summed through a tree in workgroup memory.
    Tree,
    /// A workgroup a row, each subgroup's sum by subgroup operations, then theirs.
    Subgroups,
    /// A subgroup a row (of this many invocations, the device's one subgroup size): no
    /// workgroup memory or barrier.
    Rows(u32),
}

/// One fused layer-norm kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pass: Pass,
    dtype: DType,
    sums: Sums,
    /// The rows' dx summed into a gathered gradient (`Op::BackwardInto`), and with `low` an
    /// f16 copy of it written too (of y, in the forward).
    into: bool,
    low: bool,
    /// The forward's addend's dtype (`Op::ForwardAdd`; bf16 packed).
    add: Option<DType>,
}

impl Key {
    fn new(pass: Pass, dtype: DType, sums: Sums) -> Key {
        let sums = match (pass, sums) {
            // The column sums take no row sum; the join sums a column over a workgroup.
            (Pass::BackwardSums, _) => Sums::Tree,
            (Pass::BackwardJoin, Sums::Rows(_)) => Sums::Subgroups,
            _ => sums,
        };
        Key { pass, dtype, sums, into: false, low: false, add: None }
    }
}

/// The rows' backward without a gathered gradient: `dx` as computed.
const NOT_INTO: &str = "fn summed(i: u32, v: f32) -> f32 {\n  return v;\n}\n";
/// The rows' kernels without a low copy.
const NO_LOW: &str = "fn keep(i: u32, v: f32) {}\n";
/// The forward of x as stored (no addend).
const NO_ADD: &str = "fn first(i: u32, k: u32) -> f32 {\n  return f32(load_x(x[i]));\n}\nfn again(i: u32, k: u32) -> f32 {\n  return f32(load_x(x[i]));\n}\n";

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let main = match self.pass {
            Pass::Forward => FORWARD,
            Pass::Backward => BACKWARD,
            Pass::BackwardSums => BACKWARD_SUMS,
            Pass::BackwardJoin => BACKWARD_JOIN,
        };
        let lanes = if let Sums::Rows(n) = self.sums { n } else { LANES as u32 };
        let w = Wgsl::new(repr).params::<LayerNormParams>().ty("x", self.dtype).uint("ROW_LANES", lanes).part(SHARED).part(main);
        let w = match (self.pass, self.into, self.low) {
            (Pass::Backward, true, true) => w.ty("t", DType::F16).part(BACKWARD_INTO).part(BACKWARD_LOW),
            (Pass::Backward, true, false) => w.part(BACKWARD_INTO).part(NO_LOW),
            (Pass::Backward, false, _) => w.part(NOT_INTO).part(NO_LOW),
            (Pass::Forward, _, true) => w.ty("t", DType::F16).part(FORWARD_LOW),
            (Pass::Forward, _, false) => w.part(NO_LOW),
            _ => w,
        };
        let w = match (self.pass, self.add) {
            (Pass::Forward, Some(DType::BF16)) => crate::packed::with_words(w).uint("ADD_BINDING", 7 + self.low as u32).part(FORWARD_ADD_PACKED),
            (Pass::Forward, Some(b)) => w.ty("b", b).uint("ADD_BINDING", 7 + self.low as u32).part(FORWARD_ADD),
            (Pass::Forward, None) => w.part(NO_ADD),
            _ => w,
        };
        match (self.pass, self.sums) {
            (Pass::BackwardSums, _) => w.build(),
            (_, Sums::Tree) => w.part(TREE).build(),
            (_, Sums::Subgroups) => w.part(SUBGROUP).build(),
            (_, Sums::Rows(_)) => w.part(ROWS).build(),
        }
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let passes = [Pass::Forward, Pass::Backward, Pass::BackwardSums, Pass::BackwardJoin];
        let sums = [Sums::Tree, Sums::Subgroups, Sums::Rows(8), Sums::Rows(32), Sums::Rows(64)];
        let mut keys: Vec<Key> = Vec::new();
        for pass in passes {
            for dtype in DType::ALL.into_iter().filter(|&t| repr.computes(t) && t != DType::F64) {
                // Into a gathered gradient in f32 only, with an f16 copy or not; the forward
                // of f32 with an f16 copy or not.
                let into: &[(bool, bool)] = match (pass, dtype) {
                    (Pass::Backward, DType::F32) => &[(false, false), (true, false), (true, true)],
                    (Pass::Forward, DType::F32) => &[(false, false), (false, true)],
                    _ => &[(false, false)],
                };
                // The forward of f32 with an f32, f16 or packed bf16 addend too.
                let adds: Vec<Option<DType>> = match (pass, dtype) {
                    (Pass::Forward, DType::F32) => {
                        [None, Some(DType::F32), Some(DType::BF16)].into_iter().chain(repr.computes(DType::F16).then_some(Some(DType::F16))).collect()
                    }
                    _ => vec![None],
                };
                for s in sums {
                    for &(into, low) in into {
                        for &add in &adds {
                            let k = Key { into, low, add, ..Key::new(pass, dtype, s) };
                            if !keys.contains(&k) {
                                keys.push(k);
                            }
                        }
                    }
                }
            }
        }
        keys
    }
}

crate::shader_params! {
    /// A fused layer norm's block (`shaders/fused_layer_norm.wgsl`): x is `[rows, d]`;
    /// `flags` 1 weight, 2 bias; the backward's column sums cut the rows into `segments` of
    /// `segment_rows`; `zero` is 0 (a value a kernel's compiler cannot fold); the inputs'
    /// offsets in binding order.
    struct LayerNormParams {
        rows: u32,
        d: u32,
        flags: u32,
        eps: f32,
        segments: u32,
        segment_rows: u32,
        zero: u32,
        offsets: [u32; 8],
    }
}

/// A grid of one workgroup per row, or per column for the join of the parameters' sums
/// (two-dimensional past a grid dimension's limit).
fn rows_grid(rows: usize) -> (u32, u32, u32) {
    grid(rows * WG)
}

impl WgpuBackend {
    /// Runs a fused layer-norm op, or `None` (f64; non-contiguous operands; buffers beyond one
    /// binding or 32-bit offsets).
    pub(crate) fn fused_layer_norm(&self, o: &LayerNormOptions, op: Op, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let x = inputs.first()?;
        let (dtype, numel, d) = (x.dtype, x.layout.numel(), o.width);
        if !self.repr.computes(dtype) || dtype == DType::F64 || d == 0 || numel % d != 0 || inputs.iter().any(|v| !v.layout.is_contiguous()) {
            return None;
        }
        let (backward, into, low, add) = match op {
            Op::Forward(low) => (false, false, low, false),
            Op::ForwardAdd(low) => (false, false, low, true),
            Op::Backward => (true, false, None, false),
            Op::BackwardInto(low) => (true, true, low, false),
        };
        // An addend to f32 x only, f32, f16 or packed bf16, one to each element of x.
        let addend = if add {
            let b = inputs.last().filter(|b| inputs.len() == 2 + o.weight as usize + o.bias as usize && b.layout.numel() == numel)?;
            let readable = match b.dtype {
                DType::F32 | DType::F16 => self.repr.computes(b.dtype),
                DType::BF16 => crate::packed::packed_view(b),
                _ => false,
            };
            if dtype != DType::F32 || !readable {
                return None;
            }
            Some(b)
        } else {
            None
        };
        // Summed into a gathered gradient in f32 only (the residual streams autocast keeps),
        // its low copy in f16 only.
        if into && (dtype != DType::F32 || inputs.last().is_none_or(|acc| acc.dtype != DType::F32 || acc.layout.numel() != numel)) {
            return None;
        }
        if low.is_some_and(|t| t != DType::F16 || dtype != DType::F32 || !self.repr.computes(t)) {
            return None;
        }
        let rows = numel / d;
        let gpu = match self.fused_gpu(dtype, &[numel], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let segments = rows.div_ceil(MIN_SEGMENT_ROWS).clamp(1, MAX_SEGMENTS);
        let per_segment = rows.div_ceil(segments).max(1);
        let segments = rows.div_ceil(per_segment).max(1);
        let flags = o.weight as u32 | (o.bias as u32) << 1;
        let mut block = LayerNormParams {
            rows: u32::try_from(rows).ok()?,
            d: u32::try_from(d).ok()?,
            flags,
            eps: o.eps as f32,
            segments: segments as u32,
            segment_rows: per_segment as u32,
            zero: 0,
            offsets: [0; 8],
        };
        if inputs.len() > block.offsets.len() {
            return None;
        }
        for (offset, v) in block.offsets.iter_mut().zip(inputs) {
            *offset = u32::try_from(v.layout.offset()).ok()?;
        }
        // The forward's addend's offset in a slot the forward leaves free.
        if let Some(b) = addend {
            block.offsets[3] = u32::try_from(b.layout.offset()).ok()?;
        }
        let meta = words(&block);
        let buf = |k: usize| gpu_storage(&inputs[k]).buffer();
        let sums = match (gpu.options().testing.row_sums, gpu.subgroup_size) {
            (RowSums::Auto, Some(n)) if n.is_power_of_two() && n as usize <= LANES => Sums::Rows(n),
            (RowSums::Auto | RowSums::Subgroups, _) if gpu.subgroups => Sums::Subgroups,
            _ => Sums::Tree,
        };
        // The row kernels' workgroups: one a row, or one a LANES / n rows.
        let row_groups = match sums {
            Sums::Rows(n) => rows_grid(rows.div_ceil(LANES / n as usize)),
            _ => rows_grid(rows),
        };
        Some((|| {
            if !backward {
                let kernel = gpu.kernel(Key { low: low.is_some(), add: addend.map(|b| b.dtype), ..Key::new(Pass::Forward, dtype, sums) })?;
                let (y, mean, rstd) = (self.output(dtype, numel)?, self.output(dtype, rows)?, self.output(dtype, rows)?);
                let y_low = low.map(|t| self.output(t, numel)).transpose()?;
                let total = addend.map(|_| self.output(dtype, numel)).transpose()?;
                // Absent parameters are bound to x (read only, never read).
                let weight = if o.weight { buf(1) } else { buf(0) };
                let bias = if o.bias { buf(1 + o.weight as usize) } else { buf(0) };
                let mut bound = vec![buf(0), weight, bias, y.buffer(), mean.buffer(), rstd.buffer()];
                bound.extend(y_low.as_ref().map(|l| l.buffer()));
                if let Some(total) = &total {
                    bound.extend([buf(inputs.len() - 1), total.buffer()]);
                }
                gpu.dispatch(&kernel, &meta, &bound, row_groups)?;
                return Ok([y, mean, rstd].into_iter().chain(y_low).chain(total).map(|s| Arc::new(s) as Storage).collect());
            }
            let kernel = gpu.kernel(Key { into, low: low.is_some(), ..Key::new(Pass::Backward, dtype, sums) })?;
            let dx = self.output(dtype, numel)?;
            let dx_low = low.map(|t| self.output(t, numel)).transpose()?;
            let weight = if o.weight { buf(4) } else { buf(0) };
            let mut bound = vec![buf(0), buf(1), buf(2), buf(3), weight, dx.buffer()];
            bound.extend(into.then(|| buf(inputs.len() - 1)));
            bound.extend(dx_low.as_ref().map(|l| l.buffer()));
            gpu.dispatch(&kernel, &meta, &bound, row_groups)?;
            let mut outs = vec![dx];
            if o.weight || o.bias {
                let (sums, join) = (gpu.kernel(Key::new(Pass::BackwardSums, dtype, sums))?, gpu.kernel(Key::new(Pass::BackwardJoin, dtype, sums))?);
                let partial = self.output(DType::F32, segments * d * 2)?;
                let columns = d.div_ceil(LANES) as u32;
                gpu.dispatch(&sums, &meta, &[buf(0), buf(1), buf(2), buf(3), partial.buffer()], (columns, segments as u32, 1))?;
                // An absent parameter's gradient goes to a one-element placeholder, never kept.
                let dweight = self.output(dtype, if o.weight { d } else { 1 })?;
                let dbias = self.output(dtype, if o.bias { d } else { 1 })?;
                gpu.dispatch(&join, &meta, &[partial.buffer(), dweight.buffer(), dbias.buffer()], rows_grid(d))?;
                outs.extend(o.weight.then_some(dweight));
                outs.extend(o.bias.then_some(dbias));
            }
            outs.extend(dx_low);
            Ok(outs.into_iter().map(|s| Arc::new(s) as Storage).collect())
        })())
    }
}
