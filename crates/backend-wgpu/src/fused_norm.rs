//! Fused batch normalization in training (`liandan_tensor::ops::BatchNormTrain`, its gradient
//! `BatchNormBackward`): two dispatches each, where the composite takes some twenty.
//! The first summarizes every segment of every channel (workgroup `(s, c)`); the second joins
//! a channel's summaries in each of its workgroups and writes the output over its segment, so
//! a long channel (resnet's first layers hold 128 x 32 x 32 values per channel) spreads over
//! many workgroups. Statistics are kept in f32 whatever the dtype; f64 is left to the
//! composite, like the other fused kernels here. Under autocast the activations may be f16 or
//! bf16 beside f32 parameters and statistics (the `param` type of a key); packed bf16
//! activations beside f32 ones are read and written as stored where L is even (a word then
//! holds two values of one channel), so a step widens and packs none of them. f32 and f16
//! activations are read and written four at a time where L is a multiple of four: per value,
//! the kernels' index arithmetic costs more than the memory it addresses.

use std::sync::Arc;

use liandan_tensor::{BatchNormOptions, DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{KernelKey, Wgsl, WG};
use crate::packed::{packed_view, with_words};
use crate::params::words;
use crate::repr::Repr;

const SHARED: &str = include_str!("shaders/fused_batch_norm.wgsl");
const STATS: &str = include_str!("shaders/fused_batch_norm_stats.wgsl");
const FORWARD: &str = include_str!("shaders/fused_batch_norm_forward.wgsl");
const BACKWARD_SUMS: &str = include_str!("shaders/fused_batch_norm_backward_sums.wgsl");
const BACKWARD: &str = include_str!("shaders/fused_batch_norm_backward.wgsl");
const BACKWARD_AFFINE: &str = include_str!("shaders/fused_batch_norm_backward_affine.wgsl");
/// How the passes read x and dy and write their output, by [`Io`].
const READ_X: [&str; 3] =
    [include_str!("shaders/batch_norm_io/x.wgsl"), include_str!("shaders/batch_norm_io/x_vec4.wgsl"), include_str!("shaders/batch_norm_io/x_packed.wgsl")];
const READ_DY: [&str; 3] =
    [include_str!("shaders/batch_norm_io/dy.wgsl"), include_str!("shaders/batch_norm_io/dy_vec4.wgsl"), include_str!("shaders/batch_norm_io/dy_packed.wgsl")];
const WRITE: [&str; 3] = [
    include_str!("shaders/batch_norm_io/write.wgsl"),
    include_str!("shaders/batch_norm_io/write_vec4.wgsl"),
    include_str!("shaders/batch_norm_io/write_packed.wgsl"),
];

/// Values each invocation of a workgroup covers in a segment, before a channel is cut into
/// more segments; and the most segments a channel is cut into (the second pass joins them in
/// one workgroup).
const PER_INVOCATION: usize = 16;
const MAX_SEGMENTS: usize = 256;
/// Storage buffers the forward's second pass binds, its parameter block's included.
const FORWARD_BINDINGS: usize = 14;
/// The most workgroups along one grid dimension (here: channels).
const MAX_GROUPS: usize = 65_535;

/// One pass of a fused batch normalization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pass {
    Stats,
    Forward,
    BackwardSums,
    Backward,
}

/// How a pass reads and writes the activations: a value at a time as stored, four (f32 or f16)
/// as a vec4, or two a packed bf16 word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Io {
    Stored,
    Vec4,
    Packed,
}

impl Io {
    /// Values a chunk: segments and L are multiples of it.
    fn chunk(self) -> usize {
        match self {
            Io::Stored => 1,
            Io::Vec4 => 4,
            Io::Packed => 2,
        }
    }
}

/// One fused batch-norm kernel variant (see `kernels::KernelKey`): the activations' type and
/// the `[C]` operands' (`dtype` itself, or f32 beside a half; the forward's first pass reads
/// no `[C]` operand, so its key always has `param == dtype`), and how the activations are read
/// (packed bf16 only beside f32 `[C]` operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pass: Pass,
    dtype: DType,
    param: DType,
    io: Io,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let main = match self.pass {
            Pass::Stats => STATS,
            Pass::Forward => FORWARD,
            Pass::BackwardSums => BACKWARD_SUMS,
            Pass::Backward => BACKWARD,
        };
        let io = self.io as usize;
        let w = Wgsl::new(repr).params::<BatchNormParams>().ty("x", self.dtype).ty("p", self.param);
        let w = match self.io {
            Io::Stored => w.alias("A_x", "S_x"),
            Io::Vec4 => w.alias("A_x", "vec4<S_x>"),
            Io::Packed => with_words(w).alias("A_x", "u32"),
        };
        let w = w.part(SHARED).part(main).part(READ_X[io]);
        let w = if matches!(self.pass, Pass::BackwardSums | Pass::Backward) { w.part(BACKWARD_AFFINE).part(READ_DY[io]) } else { w };
        let w = if matches!(self.pass, Pass::Forward | Pass::Backward) { w.part(WRITE[io]) } else { w };
        w.build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let passes = [Pass::Stats, Pass::Forward, Pass::BackwardSums, Pass::Backward];
        let same = passes.into_iter().flat_map(|pass| DType::ALL.map(|dtype| (pass, dtype, dtype)));
        let mixed = passes[1..].iter().flat_map(|&pass| [DType::F16, DType::BF16].map(|dtype| (pass, dtype, DType::F32)));
        let unpacked = same
            .chain(mixed)
            .filter(|&(_, dtype, param)| repr.computes(dtype) && repr.computes(param) && dtype != DType::F64 && param != DType::F64)
            .flat_map(|(pass, dtype, param)| {
                let vec4 = matches!(dtype, DType::F32 | DType::F16).then_some(Key { pass, dtype, param, io: Io::Vec4 });
                std::iter::once(Key { pass, dtype, param, io: Io::Stored }).chain(vec4)
            });
        // Packed: the stats pass reads no [C] operand (its param is the dtype's).
        let packed =
            passes.into_iter().map(|pass| Key { pass, dtype: DType::BF16, param: if pass == Pass::Stats { DType::BF16 } else { DType::F32 }, io: Io::Packed });
        unpacked.chain(packed).collect()
    }
}

crate::shader_params! {
    /// A fused batch norm's block (`shaders/fused_batch_norm.wgsl`): x is `[n, c, l]`, each
    /// channel cut into `segments` of `segment_len` values; `flags` 1 affine, 2 running
    /// statistics, 4 a ReLU after, 8 a batch count; the inputs' offsets in binding order.
    struct BatchNormParams {
        n: u32,
        c: u32,
        l: u32,
        segments: u32,
        segment_len: u32,
        flags: u32,
        eps: f32,
        momentum: f32,
        offsets: [u32; 8],
    }
}

/// Whether a fused batch norm reads `inputs` as they are stored: packed bf16 activations (x,
/// and the backward's dy) beside f32 `[C]` operands (autocast's) and any batch count, with L
/// even.
pub(crate) fn reads_packed(opts: &BatchNormOptions, backward: bool, inputs: &[Strided]) -> bool {
    let activations = if backward { 2 } else { 1 };
    let inputs = &inputs[..inputs.len().saturating_sub(opts.count as usize)];
    let Some(x) = inputs.first() else { return false };
    let l: usize = x.layout.shape().iter().skip(2).product();
    inputs.len() > activations
        && inputs[..activations].iter().all(packed_view)
        && inputs[activations..].iter().all(|v| v.dtype == DType::F32)
        && l.is_multiple_of(2)
}

impl WgpuBackend {
    /// Runs a fused batch-norm op in two dispatches, or `None` (f64; buffers beyond one binding
    /// or 32-bit offsets; more channels than a grid dimension holds; `[C]` operands of a type
    /// other than the activations' or, beside a half, f32; a batch count on a device that binds
    /// too few buffers for it).
    pub(crate) fn fused_batch_norm(&self, opts: &BatchNormOptions, backward: bool, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let x = inputs.first()?;
        let (dtype, shape) = (x.dtype, x.layout.shape());
        if !self.repr.computes(dtype) || dtype == DType::F64 || shape.len() < 2 {
            return None;
        }
        // The [C] operands: the forward's parameters, the backward's statistics.
        let param = inputs.get(if backward { 2 } else { 1 }).map_or(dtype, |p| p.dtype);
        if param != dtype && !(param == DType::F32 && matches!(dtype, DType::F16 | DType::BF16)) {
            return None;
        }
        if opts.count {
            let counted = !backward && opts.running && inputs.last().is_some_and(|v| v.dtype == DType::I64 && v.layout.numel() == 1);
            match self.max_bindings() {
                Ok(most) if counted && most >= FORWARD_BINDINGS => {}
                Ok(_) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        let (n, c) = (shape[0], shape[1]);
        let numel = x.layout.numel();
        let m = numel.checked_div(c)?;
        if c == 0 || c > MAX_GROUPS || m == 0 {
            return None;
        }
        let gpu = match self.fused_gpu(dtype, &[numel], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let streams = if backward { 2 } else { 1 };
        let io = if packed_view(x) {
            if !reads_packed(opts, backward, inputs) {
                return None;
            }
            Io::Packed
        } else if matches!(dtype, DType::F32 | DType::F16)
            && (m / n.max(1)).is_multiple_of(4)
            && inputs[..streams.min(inputs.len())].iter().all(|v| v.layout.is_contiguous() && v.layout.offset().is_multiple_of(4))
        {
            Io::Vec4
        } else {
            Io::Stored
        };
        let segments = m.div_ceil(WG * PER_INVOCATION).clamp(1, MAX_SEGMENTS);
        // A segment holds whole chunks (M is a multiple of a chunk with L).
        let seg = m.div_ceil(segments).next_multiple_of(io.chunk());
        let flags = opts.affine as u32 | (opts.running as u32) << 1 | (opts.relu as u32) << 2 | (opts.count as u32) << 3;
        let mut block = BatchNormParams {
            n: n as u32,
            c: c as u32,
            l: (m / n.max(1)) as u32,
            segments: segments as u32,
            segment_len: seg as u32,
            flags,
            eps: opts.eps as f32,
            momentum: opts.momentum as f32,
            offsets: [0; 8],
        };
        if inputs.len() > block.offsets.len() {
            return None;
        }
        for (offset, v) in block.offsets.iter_mut().zip(inputs) {
            *offset = u32::try_from(v.layout.offset()).ok()?;
        }
        let meta = words(&block);
        let groups = (segments as u32, c as u32, 1);
        Some((|| {
            let (first, second, words) = if backward { (Pass::BackwardSums, Pass::Backward, 2) } else { (Pass::Stats, Pass::Forward, 3) };
            let first_param = if backward { param } else { dtype };
            let (first, second) = (gpu.kernel(Key { pass: first, dtype, param: first_param, io })?, gpu.kernel(Key { pass: second, dtype, param, io })?);
            let partial = self.output(DType::F32, c * segments * words)?;
            let buf = |k: usize| gpu_storage(&inputs[k]).buffer();
            // Absent operands are bound to placeholders: an input to `x` (read only, never
            // read), an output to a one-element buffer (written, never kept).
            let input = |k: usize, present: bool| if present { buf(k) } else { buf(0) };
            // The op's outputs: y, mean, invstd (and the running statistics); dx (and the
            // parameters' gradients).
            let count = if backward { 1 + 2 * opts.affine as usize } else { 3 + 2 * opts.running as usize };
            let activations = |numel| if io == Io::Packed { self.packed_output(numel) } else { self.output(dtype, numel) };
            let mut outs = (0..count).map(|k| if k == 0 { activations(numel) } else { self.output(param, c) }).collect::<Result<Vec<_>>>()?;
            // The batch count's: the op's last output, or a placeholder.
            let batches = self.output(DType::I64, 1)?;
            let bound = if backward { 3 } else { 5 };
            let spare = (outs.len()..bound).map(|_| self.output(param, 1)).collect::<Result<Vec<_>>>()?;
            let out = |k: usize| outs.get(k).unwrap_or_else(|| &spare[k - outs.len()]).buffer();
            if backward {
                let params = [buf(0), buf(1), buf(2), buf(3), input(4, opts.affine), input(5, opts.affine && opts.relu)];
                gpu.dispatch(&first, &meta, &[&params[..], &[partial.buffer()]].concat(), groups)?;
                gpu.dispatch(&second, &meta, &[&params[..], &[partial.buffer(), out(0), out(1), out(2)]].concat(), groups)?;
            } else {
                gpu.dispatch(&first, &meta, &[buf(0), partial.buffer()], groups)?;
                let stats = if opts.affine { 3 } else { 1 };
                let params = [input(1, opts.affine), input(2, opts.affine), input(stats, opts.running), input(stats + 1, opts.running)];
                let outputs = [partial.buffer(), out(0), out(1), out(2), out(3), out(4)];
                let bindings = [&[buf(0)][..], &params, &outputs, &[input(stats + 2, opts.count), batches.buffer()]].concat();
                gpu.dispatch(&second, &meta, &bindings, groups)?;
            }
            if opts.count {
                outs.push(batches);
            }
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
