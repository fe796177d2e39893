//! Fused attention (`liandan_tensor::ops::Attention`, its gradient `AttentionBackward`): one
//! dispatch each way, a workgroup a head (three in the backward, [`Key::sides_for`]), where the
//! composite takes a product, a scaling, a softmax and a product each way besides copies of the
//! heads in and out. Each product of a head must fit one 80 x 80 tile, as the heads kernel of
//! the products (`matmul/heads.wgsl`) takes a ViT's: lengths and widths of at most
//! [`MAX_SIDE`]; other heads run the composite.
//! The operands are read through their strides (the heads of a packed projection as they lie)
//! and the results are written in the layout the heads merge into. f32, f16 and bf16: packed
//! bf16 is read as stored and written a word at a time where the widths are even (the forward's
//! probabilities are packed after), and widened first elsewhere; f64 is left to the composite.
//! f16's backward runs on the tensor cores where the f16 matmul does
//! (`shaders/attention/coop_backward.wgsl`: a head's operands staged whole, five subgroups a
//! head); its forward stays on the ordinary units, as fast there as on the tensor cores.

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl, WG};
use crate::packed::{all_packed, with_words};
use crate::params::words;
use crate::repr::Repr;

const COMMON: &str = include_str!("shaders/attention/common.wgsl");
const FORWARD: &str = include_str!("shaders/attention/forward.wgsl");
const BACKWARD: &str = include_str!("shaders/attention/backward.wgsl");
const IO: &str = include_str!("shaders/attention/io.wgsl");
const IO_PACKED: &str = include_str!("shaders/attention/io_packed.wgsl");
const COOP_BACKWARD: &str = include_str!("shaders/attention/coop_backward.wgsl");

/// Workgroup memory the backward on cooperative matrices takes: three staged operands of 80
/// rows of 88 f16, and five subgroups' 16 x 16 f32 scratch.
const COOP_SHARED: u32 = 3 * 80 * 88 * 2 + 5 * 256 * 4;

/// The longest sequence and widest head a workgroup takes (the shaders' tile, `HT`).
pub(crate) const MAX_SIDE: usize = 80;

/// A fused attention pass: the forward, its gradient, or its gradient joined (q, k and v of one
/// shape; `ops::AttentionBackwardJoined`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    Forward,
    Backward,
    Joined,
}

/// One fused attention kernel variant (see `kernels::KernelKey`): forward, or with `backward`
/// its gradient; `packed` on packed bf16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    backward: bool,
    dtype: DType,
    packed: bool,
    /// Rows reduced across by subgroup shuffles (the device's subgroups 16 wide or more).
    shuffle: bool,
    /// The backward on cooperative matrices (f16 only; `coop_backward.wgsl`).
    coop: bool,
    /// Workgroups a head ([`Key::sides_for`]).
    sides: u32,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        if self.coop {
            let w = Wgsl::new(repr).params::<AttentionParams>().enable("wgpu_cooperative_matrix").ty("x", DType::F16);
            return w.part(COOP_BACKWARD).build();
        }
        let main = if self.backward { BACKWARD } else { FORWARD };
        let w = Wgsl::new(repr).params::<AttentionParams>().ty("x", self.dtype).flag("ACROSS_SHUFFLE", self.shuffle).uint("SIDES", self.sides);
        let w = match self.packed {
            true => with_words(w).alias("A_x", "u32").alias("P_", "f32").part(IO_PACKED),
            false => w.alias("A_x", "S_x").alias("P_", "S_x").part(IO),
        };
        w.part(COMMON).part(main).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let keys = [(false, false), (false, true), (true, false), (true, true)].into_iter().flat_map(|(backward, shuffle)| {
            // The backward on each spread a knob can ask for (`testing::Knobs::attention_sides`).
            let spreads: &[u32] = if backward { &[1, 2, 3] } else { &[1] };
            let kinds = [(DType::F32, false), (DType::F16, false), (DType::BF16, false), (DType::BF16, true)];
            kinds.into_iter().flat_map(move |(dtype, packed)| spreads.iter().map(move |&sides| Key { backward, dtype, packed, shuffle, coop: false, sides }))
        });
        let mut keys: Vec<Key> = keys.filter(|k| repr.computes(k.dtype)).collect();
        // As the f16 matmul on cooperative matrices, only where f16 is held natively.
        if repr.f16 {
            keys.push(Key { backward: true, dtype: DType::F16, packed: false, shuffle: true, coop: true, sides: 1 });
        }
        keys
    }
}

impl Key {
    /// Workgroups a head: the backward's query side (dq), key side (dk) and value side (dv)
    /// apart, dp computed on the first two (the value side needs none); one a head on packed
    /// bf16, whose loads make the twice-computed part cost more than the spread saves, and on
    /// cooperative matrices. `testing::Knobs::attention_sides` asks for another spread.
    fn sides_for(backward: bool, packed: bool, coop: bool) -> u32 {
        if backward && !packed && !coop {
            3
        } else {
            1
        }
    }
}

/// Whether the kernels take `inputs` as stored: all packed bf16, their heads' widths even (so
/// each row of a result starts a word).
pub(crate) fn reads_packed(inputs: &[Strided]) -> bool {
    let even = |v: &Strided| v.layout.shape().last().is_some_and(|w| w % 2 == 0);
    all_packed(inputs) && inputs.len() >= 3 && inputs[..3].iter().all(even)
}

crate::shader_params! {
    /// A fused attention pass's block (`shaders/attention/common.wgsl`): `n` x `h` heads of
    /// `l` queries and `s` keys, widths `e` and `ev`; `joined` 1 where the backward's three
    /// results go side by side into one; each strided operand as [offset, n, h, row] strides.
    struct AttentionParams {
        n: u32,
        h: u32,
        l: u32,
        s: u32,
        e: u32,
        ev: u32,
        scale: f32,
        joined: u32,
        q: [u32; 4],
        k: [u32; 4],
        v: [u32; 4],
        g: [u32; 4],
        pr: [u32; 4],
    }
}

/// A 4-D operand's [offset, n, h, row] strides, its `axes` naming which dims those are, or
/// `None` where its last dim is not dense or a number passes 32 bits.
fn strides(v: &Strided, axes: [usize; 3]) -> Option<[u32; 4]> {
    let (shape, st) = (v.layout.shape(), v.layout.strides());
    if shape.len() != 4 || (shape[3] > 1 && st[3] != 1) {
        return None;
    }
    let u = |x: usize| u32::try_from(x).ok();
    Some([u(v.layout.offset())?, u(st[axes[0]])?, u(st[axes[1]])?, u(st[axes[2]])?])
}

impl WgpuBackend {
    /// Runs fused attention forward (inputs q, k, v) or backward (q, k, v, do, p), or `None`
    /// (see the module docs).
    pub(crate) fn fused_attention(&self, scale: f64, pass: Pass, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let backward = pass != Pass::Forward;
        let joined = pass == Pass::Joined;
        if inputs.len() != if backward { 5 } else { 3 } {
            return None;
        }
        let dtype = inputs[0].dtype;
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) || !self.repr.computes(dtype) || inputs.iter().any(|v| v.dtype != dtype) {
            return None;
        }
        let (&[n, h, l, e], &[n2, h2, s, e2], &[n3, h3, s3, ev]) = (inputs[0].layout.shape(), inputs[1].layout.shape(), inputs[2].layout.shape()) else {
            return None;
        };
        if (n2, h2, e2) != (n, h, e) || (n3, h3, s3) != (n, h, s) || n * h == 0 || (joined && (s, ev) != (l, e)) {
            return None;
        }
        if [l, s, e, ev].iter().any(|&d| d > MAX_SIDE) {
            return None;
        }
        let packed = all_packed(inputs);
        if packed && !reads_packed(inputs) {
            return None;
        }
        let u = |x: usize| u32::try_from(x).ok();
        let heads = [0, 1, 2];
        let mut block = AttentionParams {
            n: u(n)?,
            h: u(h)?,
            l: u(l)?,
            s: u(s)?,
            e: u(e)?,
            ev: u(ev)?,
            scale: scale as f32,
            joined: joined as u32,
            q: strides(&inputs[0], heads)?,
            k: strides(&inputs[1], heads)?,
            v: strides(&inputs[2], heads)?,
            g: [0; 4],
            pr: [0; 4],
        };
        if backward {
            // do is [N, L, H, Ev], p [N, H, L, S].
            if inputs[3].layout.shape() != [n, l, h, ev] || inputs[4].layout.shape() != [n, h, l, s] {
                return None;
            }
            block.g = strides(&inputs[3], [0, 2, 1])?;
            block.pr = strides(&inputs[4], heads)?;
        }
        let outputs = match pass {
            Pass::Forward => vec![n * l * h * ev, n * h * l * s],
            Pass::Backward => vec![n * l * h * e, n * s * h * e, n * s * h * ev],
            Pass::Joined => vec![n * l * 3 * h * e],
        };
        let gpu = match self.fused_gpu(dtype, &outputs, inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        // The backward binds eight buffers besides its parameters.
        if gpu.limits.max_storage_buffers_per_shader_stage < 9 {
            return None;
        }
        Some((|| {
            let shuffle = gpu.subgroup_size.is_some_and(|n| n >= 16);
            let sides = match gpu.options().testing.attention_sides {
                Some(sides) if backward => sides.clamp(1, 3),
                _ => Key::sides_for(backward, packed, false),
            };
            let plain = Key { backward, dtype, packed, shuffle, coop: false, sides };
            // The backward on the tensor cores where the f16 matmul runs on them (subgroups 32
            // wide) and the staged operands fit; a driver that will not build the kernel turns
            // them off. It reads q, k, v and do, and writes its results, four values at a time.
            let fours = [e, ev].iter().all(|&d| d % 4 == 0) && [block.q, block.k, block.v, block.g].iter().flatten().all(|&x| x % 4 == 0);
            let coop = backward
                && dtype == DType::F16
                && fours
                && gpu.caps().coop.is_some()
                && gpu.limits.max_compute_workgroup_storage_size >= COOP_SHARED
                && [l, s, e, ev].iter().all(|&d| d > 0);
            // As `Key::all` lists it: the shader takes no shuffle flag.
            let tensor_cores = Key { coop: true, shuffle: true, sides: 1, ..plain };
            let (key, kernel) = match coop.then(|| crate::matmul::coop::kernel(gpu, tensor_cores)).flatten() {
                Some(kernel) => (tensor_cores, kernel),
                None => (plain, gpu.kernel(plain)?),
            };
            let groups = grid(n * h * key.sides as usize * WG);
            // Packed, the forward's probabilities are f32 words, packed on the way out.
            let out = |(k, &numel): (usize, &usize)| match packed && (backward || k == 0) {
                true => self.packed_output(numel),
                false => self.output(dtype, numel),
            };
            let outs = outputs.iter().enumerate().map(out).collect::<Result<Vec<_>>>()?;
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.extend(outs.iter().map(|o| o.buffer()));
            if joined {
                // dk's and dv's bindings, unwritten: everything goes to the one result.
                buffers.extend([outs[0].buffer(), outs[0].buffer()]);
            }
            gpu.dispatch(&kernel, &words(&block), &buffers, groups)?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
