//! Reductions over the middle axis of `[outer, len, inner]`: sum, max, min, argmax, argmin of
//! the float dtypes this device computes, as tree reductions in workgroup memory
//! (`shaders/reduce.wgsl`). Integer and bool inputs, and f64 without SHADER_F64, run on the CPU.
//!
//! How invocations are spread depends on the shape (`plan::spread`): lanes of a few elements get one
//! invocation each; longer ones 8, 32 or 256 side by side and a tree. When `inner > 1` the
//! invocations sharing an output sit apart, so that neighbours read neighbouring columns. A few
//! long lanes would leave most of the GPU idle, so they are cut into chunks and reduced in two
//! passes; the second pass also adds up the partial products of a split-K matmul.
//!
//! Sums down few columns of a contiguous view (a bias's gradient) take a kernel of their own
//! (`shaders/reduce/columns.wgsl`, `plan::columns`) that reads whole rows in vectors, where the
//! tree's spread would read a few columns of each row. So do sums over all but the channels of
//! `[N, C, ..]` (a convolution's bias gradient: `shaders/reduce/channels.wgsl`), which would
//! otherwise take two reductions.

use std::sync::Arc;

use liandan_tensor::backend::ReduceOp;
use liandan_tensor::{DType, Error, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{grid, KernelKey, Wgsl, WG};
use crate::launch::WIDE;
use crate::params::{words, Meta};
use crate::plan::{self, spread, Columns, ReducePlan, Spread, SPREADS};
use crate::repr::Repr;

const REDUCE: &str = include_str!("shaders/reduce.wgsl");

/// Which part of a reduction a kernel does: all of it, or the first (partial results per
/// chunk of a lane) or second (reducing the partials) pass of a split one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pass {
    Whole,
    Split,
    Finish,
}

/// One reduction kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    op: ReduceOp,
    dtype: DType,
    pass: Pass,
    spread: Spread,
    /// x is packed bf16 (`packed.rs`; the passes that read x only).
    packed: bool,
}

/// The bindings and their `load_` / `store_` of a pass (a file of `shaders/reduce/`). A split
/// keeps the partial results in the compute type, with the winners' indices for max and min.
fn io(op: ReduceOp, pass: Pass) -> &'static str {
    let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
    match (pass, op) {
        (Pass::Whole, _) if arg => include_str!("shaders/reduce/whole_index.wgsl"),
        (Pass::Whole, _) => include_str!("shaders/reduce/whole_value.wgsl"),
        (Pass::Split, ReduceOp::Sum) => include_str!("shaders/reduce/split.wgsl"),
        (Pass::Split, _) => include_str!("shaders/reduce/split_indexed.wgsl"),
        (Pass::Finish, ReduceOp::Sum) => include_str!("shaders/reduce/finish_value.wgsl"),
        (Pass::Finish, _) if arg => include_str!("shaders/reduce/finish_indexed_index.wgsl"),
        (Pass::Finish, _) => include_str!("shaders/reduce/finish_indexed_value.wgsl"),
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let fold = match self.op {
            ReduceOp::Sum => 0,
            ReduceOp::Max | ReduceOp::ArgMax => 1,
            ReduceOp::Min | ReduceOp::ArgMin => 2,
        };
        let w = Wgsl::new(repr).params::<ReduceParams>().ty("x", self.dtype).uint("FOLD", fold).uint("T", self.spread.t as u32).flag("COLS", self.spread.cols);
        let w = if self.packed { crate::packed::with_words(w) } else { w };
        let input = match (self.pass, self.packed) {
            (Pass::Finish, _) => "",
            (_, false) => include_str!("shaders/reduce/in.wgsl"),
            (_, true) => include_str!("shaders/reduce/in_packed.wgsl"),
        };
        w.part(input).part(io(self.op, self.pass)).part(REDUCE).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let mut out = Vec::new();
        for dtype in DType::ALL.into_iter().filter(|&d| repr.computes(d)) {
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin] {
                for pass in [Pass::Whole, Pass::Split, Pass::Finish] {
                    let packings: &[bool] = if dtype == DType::BF16 && pass != Pass::Finish { &[false, true] } else { &[false] };
                    for &packed in packings {
                        out.extend(SPREADS.map(|spread| Key { op, dtype, pass, spread, packed }));
                    }
                }
            }
        }
        out
    }
}

/// How the column kernel reads its operand: f32 or f16 as stored, or packed bf16, four
/// columns a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ColumnLoad {
    F32,
    F16,
    Packed,
}

/// One column-kernel variant (`shaders/reduce/columns.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ColumnsKey {
    load: ColumnLoad,
}

impl KernelKey for ColumnsKey {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<ColumnParams>();
        let w = match self.load {
            ColumnLoad::F32 => w.ty("x", DType::F32).part(include_str!("shaders/reduce/columns_in.wgsl")),
            ColumnLoad::F16 => w.ty("x", DType::F16).part(include_str!("shaders/reduce/columns_in.wgsl")),
            ColumnLoad::Packed => crate::packed::with_words(w).part(include_str!("shaders/reduce/columns_packed.wgsl")),
        };
        w.part(include_str!("shaders/reduce/columns.wgsl")).build()
    }

    fn all(repr: &Repr) -> Vec<ColumnsKey> {
        let mut loads = vec![ColumnLoad::F32, ColumnLoad::F16];
        if repr.computes(DType::BF16) {
            loads.push(ColumnLoad::Packed);
        }
        loads.into_iter().map(|load| ColumnsKey { load }).collect()
    }
}

/// How the channel kernel reads its operand: one element at a time as stored, or packed bf16
/// a word (two elements) at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ChannelLoad {
    Stored(DType),
    Packed,
}

/// One channel-sum variant (`shaders/reduce/channels.wgsl`): its load and the output's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ChannelsKey {
    load: ChannelLoad,
    y: DType,
}

impl KernelKey for ChannelsKey {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<ChannelParams>().ty("y", self.y);
        let w = match self.load {
            ChannelLoad::Stored(dtype) => w.ty("x", dtype).part(include_str!("shaders/reduce/channels_in.wgsl")),
            ChannelLoad::Packed => crate::packed::with_words(w).part(include_str!("shaders/reduce/channels_packed.wgsl")),
        };
        w.part(include_str!("shaders/reduce/channels.wgsl")).build()
    }

    fn all(repr: &Repr) -> Vec<ChannelsKey> {
        let floats = [DType::F32, DType::F16, DType::BF16].into_iter().filter(|&d| repr.computes(d));
        let mut out: Vec<ChannelsKey> =
            floats.flat_map(|d| [ChannelsKey { load: ChannelLoad::Stored(d), y: d }, ChannelsKey { load: ChannelLoad::Stored(d), y: DType::F32 }]).collect();
        out.dedup();
        if repr.computes(DType::BF16) {
            out.push(ChannelsKey { load: ChannelLoad::Packed, y: DType::F32 });
        }
        out
    }
}

crate::shader_params! {
    /// The channel kernel's block (`shaders/reduce/channels.wgsl`): x `[n, c, l]` from element
    /// `offset` (packed: `l` and `offset` in words), each channel's `n * l` in `chunks` of
    /// `chunk_len`.
    struct ChannelParams {
        n: u32,
        c: u32,
        l: u32,
        offset: u32,
        chunks: u32,
        chunk_len: u32,
    }
}

crate::shader_params! {
    /// The column kernel's block (`shaders/reduce/columns.wgsl`): the view `[outer, len,
    /// groups]` in vectors of four columns from vector `offset`, and its plan
    /// ([`Columns`]; `half`: the tree's first stride over the lanes).
    struct ColumnParams {
        outer: u32,
        len: u32,
        groups: u32,
        offset: u32,
        width: u32,
        lanes: u32,
        half: u32,
        tiles: u32,
        chunks: u32,
        chunk_rows: u32,
    }
}

crate::shader_params! {
    /// A reduction's block (`shaders/reduce.wgsl`): [`Geometry`] as the kernel reads it.
    struct ReduceParams {
        outer: u32,
        len: u32,
        inner: u32,
        chunks: u32,
        chunk_len: u32,
        outer_stride: u32,
        len_stride: u32,
        inner_stride: u32,
        offset: u32,
    }
}

/// One dispatch's geometry: `[outer, len, inner]` with strides and offset, lanes cut into
/// `chunks` of `chunk` elements.
struct Geometry {
    dims: [usize; 3],
    strides: [usize; 3],
    offset: usize,
    chunks: usize,
    chunk: usize,
}

impl Geometry {
    fn outputs(&self) -> usize {
        self.dims[0] * self.chunks * self.dims[2]
    }

    /// The meta block, or `None` when a value exceeds 32 bits.
    fn meta(&self) -> Option<Meta> {
        let [outer, len, inner] = self.dims;
        u32::try_from(self.outputs()).ok()?;
        let u = |v: usize| u32::try_from(v).ok();
        let [outer_stride, len_stride, inner_stride] = self.strides;
        Some(words(&ReduceParams {
            outer: u(outer)?,
            len: u(len)?,
            inner: u(inner)?,
            chunks: u(self.chunks)?,
            chunk_len: u(self.chunk)?,
            outer_stride: u(outer_stride)?,
            len_stride: u(len_stride)?,
            inner_stride: u(inner_stride)?,
            offset: u(self.offset)?,
        }))
    }
}

impl WgpuBackend {
    pub(crate) fn reduce_op(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        let float_out = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) { DType::I64 } else { x.dtype };
        let out_dtype = if op == ReduceOp::Sum && !x.dtype.is_float() { DType::I64 } else { float_out };
        let (shape, strides) = (x.layout.shape(), x.layout.strides());
        let whole = match (shape, strides) {
            (&[o, l, i], &[a, b, c]) => Geometry { dims: [o, l, i], strides: [a, b, c], offset: x.layout.offset(), chunks: 1, chunk: l },
            _ => return Err(Error::BadShape { op: "reduce", shape: shape.to_vec(), detail: "expected [outer, len, inner]".into() }),
        };
        let fits = whole.meta().is_some() && u32::try_from(x.layout.max_extent()).is_ok();
        if !self.repr.computes(x.dtype) || !fits {
            let why = if self.repr.computes(x.dtype) { WIDE } else { Why::Unsupported };
            return self.fallback1(format!("reduce {op:?} ({})", x.dtype), why, &[x], out_dtype, |cpu, v| cpu.reduce(op, v[0]));
        }
        let out = self.output(out_dtype, whole.outputs())?;
        let input = gpu_storage(&x).buffer();
        // Packed bf16 is read as it is (the result comes out in the kernels' words).
        let packed = crate::packed::packed_view(&x);
        if op == ReduceOp::Sum && x.dtype == DType::F32 {
            if let Some(plan) = self.column_plan(&whole)? {
                self.column_sums(ColumnLoad::F32, input, &whole, plan, out.buffer())?;
                return Ok(Arc::new(out));
            }
        }
        let [outer, _, inner] = whole.dims;
        let ReducePlan::Split { chunks, chunk } = plan::reduce(whole.dims, x.layout.numel()) else {
            self.reduce_pass(op, x.dtype, Pass::Whole, packed, &whole, &[input, out.buffer()])?;
            return Ok(Arc::new(out));
        };
        let first = Geometry { chunks, chunk, ..whole };
        let gpu = self.gpu()?;
        let n = first.outputs() as u64;
        let values = gpu.alloc(n * if x.dtype == DType::F64 { 8 } else { 4 })?;
        let indices = if op == ReduceOp::Sum { None } else { Some(gpu.alloc(n * 4)?) };
        let mut buffers: crate::bind::PerOperand<_> = smallvec::smallvec![input, values.buffer()];
        buffers.extend(indices.as_ref().map(|i| i.buffer()));
        self.reduce_pass(op, x.dtype, Pass::Split, packed, &first, &buffers)?;
        let chunks = first.chunks;
        let second = Geometry { dims: [outer, chunks, inner], strides: [chunks * inner, inner, 1], offset: 0, chunks: 1, chunk: chunks };
        buffers.remove(0);
        buffers.push(out.buffer());
        self.reduce_pass(op, x.dtype, Pass::Finish, false, &second, &buffers)?;
        drop(buffers);
        Ok(Arc::new(out))
    }

    /// `ops::SumRowsWide`: an f16 or packed bf16 `x [.., C]`, contiguous, summed over every axis
    /// but the last into f32 `[C]`, stored unrounded by the split pass's stores (one pass over
    /// the rows, or two where the plan cuts them into chunks: the second in f32). `None` (the
    /// composite runs) for other types, layouts and sizes.
    pub(crate) fn fused_sum_rows_wide(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [x] = inputs else { return None };
        let (&c, lead) = x.layout.shape().split_last()?;
        let rows: usize = lead.iter().product();
        // f16, or packed bf16 read as it is stored.
        let packed = crate::packed::packed_view(x);
        let low = (x.dtype == DType::F16 && self.repr.computes(x.dtype)) || packed;
        if !low || !x.layout.is_contiguous() || rows == 0 || c == 0 {
            return None;
        }
        let whole = Geometry { dims: [1, rows, c], strides: [rows * c, c, 1], offset: x.layout.offset(), chunks: 1, chunk: rows };
        if whole.meta().is_none() || u32::try_from(x.layout.max_extent()).is_err() {
            return None;
        }
        Some((|| {
            let out = self.output(DType::F32, c)?;
            let input = gpu_storage(x).buffer();
            if let Some(plan) = self.column_plan(&whole)? {
                let load = if packed { ColumnLoad::Packed } else { ColumnLoad::F16 };
                self.column_sums(load, input, &whole, plan, out.buffer())?;
                return Ok(vec![Arc::new(out) as Storage]);
            }
            match plan::reduce(whole.dims, rows * c) {
                ReducePlan::Whole => self.reduce_pass(ReduceOp::Sum, x.dtype, Pass::Split, packed, &whole, &[input, out.buffer()])?,
                ReducePlan::Split { chunks, chunk } => {
                    let first = Geometry { chunks, chunk, ..whole };
                    let values = self.gpu()?.alloc(first.outputs() as u64 * 4)?;
                    self.reduce_pass(ReduceOp::Sum, x.dtype, Pass::Split, packed, &first, &[input, values.buffer()])?;
                    let second = Geometry { dims: [1, chunks, c], strides: [chunks * c, c, 1], offset: 0, chunks: 1, chunk: chunks };
                    self.reduce_pass(ReduceOp::Sum, DType::F32, Pass::Finish, false, &second, &[values.buffer(), out.buffer()])?;
                }
            }
            Ok(vec![Arc::new(out) as Storage])
        })())
    }

    /// `ops::SumChannels`: a contiguous `x [N, C, ..]` of f32, f16 or bf16 summed over all but
    /// its channels into `[C]`, in f32 where `wide`, else in x's type: a workgroup a chunk of a
    /// channel (`plan::channel_chunks`), and where a channel takes several, a second pass over
    /// their sums. Packed bf16 is read as stored where each run of a channel is whole words (into
    /// f32 only). `None` (the composite runs) for other types, layouts and sizes.
    pub(crate) fn fused_sum_channels(&self, wide: bool, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [x] = inputs else { return None };
        let shape = x.layout.shape();
        let (n, c) = (*shape.first()?, *shape.get(1)?);
        let l: usize = shape[2..].iter().product();
        let packed = crate::packed::packed_view(x);
        let fits = !packed || (wide && l.is_multiple_of(2) && x.layout.offset().is_multiple_of(2));
        let float = matches!(x.dtype, DType::F32 | DType::F16 | DType::BF16) && self.repr.computes(x.dtype);
        if !float || !fits || shape.len() < 3 || !x.layout.is_contiguous() || n * c * l == 0 || u32::try_from(x.layout.max_extent()).is_err() {
            return None;
        }
        let y = if wide { DType::F32 } else { x.dtype };
        let (load, l, offset) = match packed {
            true => (ChannelLoad::Packed, l / 2, x.layout.offset() / 2),
            false => (ChannelLoad::Stored(x.dtype), l, x.layout.offset()),
        };
        Some((|| {
            let gpu = self.gpu()?;
            let out = self.output(y, c)?;
            let u = |v: usize| u32::try_from(v).map_err(|_| gpu.err("sum_channels", "a sum past 32-bit sizes"));
            let chunks = plan::channel_chunks(c, n * l);
            let chunk_len = (n * l).div_ceil(chunks);
            let params = ChannelParams { n: u(n)?, c: u(c)?, l: u(l)?, offset: u(offset)?, chunks: u(chunks)?, chunk_len: u(chunk_len)? };
            let input = gpu_storage(x).buffer();
            if chunks == 1 {
                let kernel = gpu.kernel(ChannelsKey { load, y })?;
                gpu.dispatch(&kernel, &words(&params), &[input, out.buffer()], grid(c * WG))?;
                return Ok(vec![Arc::new(out) as Storage]);
            }
            // The chunks' partial sums [chunks, C] in f32, then summed into y.
            let partials = gpu.alloc((chunks * c * 4) as u64)?;
            let kernel = gpu.kernel(ChannelsKey { load, y: DType::F32 })?;
            gpu.dispatch(&kernel, &words(&params), &[input, partials.buffer()], grid(chunks * c * WG))?;
            self.sum_partials(y, chunks, c, partials.buffer(), out.buffer())?;
            Ok(vec![Arc::new(out) as Storage])
        })())
    }

    /// The column kernel's plan for a sum over `g`'s middle axis, where its view is contiguous
    /// from an offset in whole vectors (`plan::columns` says where else).
    fn column_plan(&self, g: &Geometry) -> Result<Option<Columns>> {
        let [outer, len, inner] = g.dims;
        let dense = g.strides[2] == 1 && g.strides[1] == inner && (outer == 1 || g.strides[0] == len * inner);
        if !dense || !g.offset.is_multiple_of(4) {
            return Ok(None);
        }
        Ok(plan::columns(g.dims, &self.gpu()?.options().plan()))
    }

    /// `g`'s sum over its middle axis on the column kernel into f32 `out` `[outer, inner]`:
    /// one pass, or the chunks' partial sums and the tree's second pass over them.
    fn column_sums(&self, load: ColumnLoad, input: &wgpu::Buffer, g: &Geometry, plan: Columns, out: &wgpu::Buffer) -> Result<()> {
        let [outer, len, inner] = g.dims;
        let gpu = self.gpu()?;
        let u = |v: usize| u32::try_from(v).map_err(|_| gpu.err("reduce", "a sum past 32-bit sizes"));
        let params = ColumnParams {
            outer: u(outer)?,
            len: u(len)?,
            groups: u(inner / 4)?,
            offset: u(g.offset / 4)?,
            width: u(plan.width)?,
            lanes: u(plan.lanes)?,
            half: u(plan.lanes.next_power_of_two() / 2)?,
            tiles: u(plan.tiles)?,
            chunks: u(plan.chunks)?,
            chunk_rows: u(plan.chunk_rows)?,
        };
        let kernel = gpu.kernel(ColumnsKey { load })?;
        let invocations = outer * plan.chunks * plan.tiles * WG;
        if plan.chunks == 1 {
            return gpu.dispatch(&kernel, &words(&params), &[input, out], grid(invocations));
        }
        let partials = gpu.alloc((outer * plan.chunks * inner * 4) as u64)?;
        gpu.dispatch(&kernel, &words(&params), &[input, partials.buffer()], grid(invocations))?;
        let second = Geometry { dims: [outer, plan.chunks, inner], strides: [plan.chunks * inner, inner, 1], offset: 0, chunks: 1, chunk: plan.chunks };
        self.reduce_pass(ReduceOp::Sum, DType::F32, Pass::Finish, false, &second, &[partials.buffer(), out])
    }

    /// Sums `splits` partial results of `n` elements each, stored one after another in the
    /// compute type of `dtype`, into `out` (the second pass of a split-K matmul).
    pub(crate) fn sum_partials(&self, dtype: DType, splits: usize, n: usize, partials: &wgpu::Buffer, out: &wgpu::Buffer) -> Result<()> {
        let g = Geometry { dims: [1, splits, n], strides: [splits * n, n, 1], offset: 0, chunks: 1, chunk: splits };
        self.reduce_pass(ReduceOp::Sum, dtype, Pass::Finish, false, &g, &[partials, out])
    }

    /// One pass over `buffers` (x first; `packed`: x is packed bf16).
    fn reduce_pass(&self, op: ReduceOp, dtype: DType, pass: Pass, packed: bool, g: &Geometry, buffers: &[&wgpu::Buffer]) -> Result<()> {
        let [_, len, inner] = g.dims;
        let outputs = g.outputs();
        let sp = spread(g.chunk.min(len), inner, outputs);
        let gpu = self.gpu()?;
        let kernel = gpu.kernel(Key { op, dtype, pass, spread: sp, packed })?;
        let meta = g.meta().expect("checked by the caller");
        gpu.dispatch(&kernel, &meta, buffers, grid(outputs.div_ceil(WG / sp.t) * WG))
    }
}
