//! Convolution without column buffers: `FusedOp::Conv2d` and its two gradients as implicit
//! GEMM (`shaders/conv.wgsl`), the tiled product of `shaders/matmul/tile.wgsl` with loaders
//! that gather the im2col columns from the input (or `dy`) as they stage each slice.
//!
//! The weights are permuted to tap-major order first (a copy the size of the weights), so a
//! slice of the column matrix shares one kernel tap when the channels per group are a
//! multiple of 16: one bounds check for 16 rows. f16 and bf16 accumulate in f32; f64 and
//! sizes past 32-bit indexing or one binding are answered `None` (the composite runs).

use std::sync::Arc;

use liandan_tensor::{ConvGeometry, DType, FusedOp, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{KernelKey, Wgsl};
use crate::matmul::{LOAD_A, TILE};
use crate::repr::Repr;
use crate::storage::WgpuStorage;

const CONV: &str = include_str!("shaders/conv.wgsl");
const GATHER: &str = include_str!("shaders/conv/gather.wgsl");
const WEIGHT_DY: &str = include_str!("shaders/conv/weight_dy.wgsl");
const WEIGHT_X: &str = include_str!("shaders/conv/weight_x.wgsl");

/// Which product a dispatch computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pass {
    Forward,
    Input,
    Weight,
}

/// One compiled convolution variant (see `kernels::KernelKey`): `h` = 1 gives 64 x 64 tiles,
/// 2 gives 128 x 128 (forward and input gradient); `a4`: a read in aligned vec4s; `aligned`: the gathered channels per group
/// are a multiple of 16 (forward and input gradient); `out4`: y written in vec4s; `partial`:
/// unrounded partial sums over a split of K.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pass: Pass,
    dtype: DType,
    h: u32,
    a4: bool,
    aligned: bool,
    out4: bool,
    partial: bool,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let k = *self;
        let read_a = if k.a4 { include_str!("shaders/matmul/read_a4.wgsl") } else { include_str!("shaders/matmul/read_a.wgsl") };
        let out = if k.partial { include_str!("shaders/matmul/out_partial.wgsl") } else { include_str!("shaders/matmul/out_rounded.wgsl") };
        let write = if k.out4 { include_str!("shaders/matmul/write4.wgsl") } else { include_str!("shaders/matmul/write.wgsl") };
        // As matmul: 64 x 64 f32 tiles afford a vec4 of padding per row within 16 KiB.
        let pad = k.h == 1;
        let w = Wgsl::new(repr).ty("x", k.dtype).uint("H", k.h).uint("PAD", pad as u32).flag("OUT4", k.out4).flag("UNROLL", k.dtype == DType::F32);
        let w = w.part(read_a).part(include_str!("shaders/matmul/read_b.wgsl")).part(out).part(write).part(TILE);
        let w = match k.pass {
            Pass::Forward | Pass::Input => {
                let w = w.uint("A_LOAD", if k.a4 { 0 } else { 2 }).flag("ALIGNED", k.aligned).flag("TRANSPOSED", k.pass == Pass::Input);
                w.part(LOAD_A).part(GATHER)
            }
            Pass::Weight => w.flag("A4", k.a4).part(WEIGHT_DY).part(WEIGHT_X),
        };
        w.part(CONV).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let mut all = Vec::new();
        for dtype in [DType::F32, DType::F16, DType::BF16].into_iter().filter(|&d| repr.computes(d)) {
            for pass in [Pass::Forward, Pass::Input, Pass::Weight] {
                let aligned: &[bool] = if pass == Pass::Weight { &[false] } else { &[false, true] };
                let tiles: &[u32] = if pass == Pass::Weight { &[1] } else { &[1, 2] };
                for &h in tiles {
                    for a4 in [false, true] {
                        for &aligned in aligned {
                            for out4 in [false, true] {
                                for partial in [false, true] {
                                    all.push(Key { pass, dtype, h, a4, aligned, out4, partial });
                                }
                            }
                        }
                    }
                }
            }
        }
        all
    }
}

/// Tiles of 128 x 128 once there are this many of them and M fills them; K split as matmul
/// does when the tiles alone would leave a big GPU idle.
const BIG_TILES: usize = 192;
const FEW_TILES: usize = 256;
const SPLIT_TILES: usize = 512;
const MIN_SPLIT_K: usize = 256;

/// One pass as a product: `[G]` batches of `M x K` times `K x N`, and where its operands are.
struct Plan {
    pass: Pass,
    m: usize,
    k: usize,
    n: usize,
    /// Per group strides of a, b and y; the output's size; P and RS of `out_at`.
    strides: [usize; 3],
    total: usize,
    p: usize,
    rs: usize,
    /// The gathered operand's channels per group, channel and image strides, height and width,
    /// and the column grid's width and size (forward and input gradient).
    gather: [usize; 7],
    aligned: bool,
}

impl Plan {
    fn new(pass: Pass, g: &ConvGeometry) -> Plan {
        let (groups, kk) = (g.groups, g.kernel.0 * g.kernel.1);
        let (cg, og) = (g.c / groups, g.o / groups);
        let (oh, ow) = (g.out_h(), g.out_w());
        let (l, hw) = (oh * ow, g.h * g.w);
        match pass {
            Pass::Forward => Plan {
                pass,
                m: og,
                k: kk * cg,
                n: g.n * l,
                strides: [og * kk * cg, cg * hw, og * l],
                total: g.n * g.o * l,
                p: l,
                rs: g.o * l,
                gather: [cg, hw, g.c * hw, g.h, g.w, ow, l],
                aligned: cg.is_multiple_of(16),
            },
            Pass::Input => Plan {
                pass,
                m: cg,
                k: kk * og,
                n: g.n * hw,
                strides: [cg * kk * og, og * l, cg * hw],
                total: g.n * g.c * hw,
                p: hw,
                rs: g.c * hw,
                gather: [og, l, g.o * l, oh, ow, g.w, hw],
                aligned: og.is_multiple_of(16),
            },
            Pass::Weight => {
                let n = cg * kk;
                Plan { pass, m: og, k: g.n * l, n, strides: [og * l, cg * hw, og * n], total: g.o * n, p: n, rs: 0, gather: [0; 7], aligned: false }
            }
        }
    }
}

/// The weights `[O, C/G, kh, kw]` as the pass's a operand wants them, as a layout over their
/// buffer: `[G, O/G, taps, C/G]` for the forward, `[G, C/G, taps, O/G]` for the input gradient.
fn permuted_weight(g: &ConvGeometry, w: &Layout, pass: Pass) -> Layout {
    let (groups, kk) = (g.groups, g.kernel.0 * g.kernel.1);
    let (cg, og) = (g.c / groups, g.o / groups);
    // Strides of the weight viewed as [G, O/G, C/G, taps].
    let (sg, so, sc, st) = (og * cg * kk, cg * kk, kk, 1);
    let (shape, strides) = match pass {
        Pass::Forward => (vec![groups, og, kk, cg], vec![sg, so, st, sc]),
        _ => (vec![groups, cg, kk, og], vec![sg, sc, st, so]),
    };
    Layout::new(shape, strides, w.offset())
}

impl WgpuBackend {
    /// Runs a convolution pass, or `None` (see the module docs).
    pub(crate) fn fused_conv(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let (pass, geom) = match op {
            FusedOp::Conv2d(g) => (Pass::Forward, *g),
            FusedOp::Conv2dBackwardInput(g) => (Pass::Input, *g),
            FusedOp::Conv2dBackwardWeight(g) => (Pass::Weight, *g),
            _ => return None,
        };
        let dtype = inputs.first()?.dtype;
        if !self.repr.computes(dtype) || dtype == DType::F64 || inputs.len() != 2 {
            return None;
        }
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let plan = Plan::new(pass, &geom);
        let limit = gpu.max_binding();
        // Signed 32-bit addressing in the gather loaders, and the packed tap shifts of the
        // weight gradient (16 bits each).
        let small = |v: usize| v < i32::MAX as usize;
        let span = |k: usize, d: usize| (k - 1) * d;
        let packs =
            span(geom.kernel.0, geom.dilation.0) + geom.h + geom.padding.0 < 65_535 && span(geom.kernel.1, geom.dilation.1) + geom.w + geom.padding.1 < 65_535;
        let sizes = [plan.total, plan.m * plan.k * geom.groups, plan.k * plan.n, geom.input_shape().iter().product(), geom.output_shape().iter().product()];
        if !packs
            || !sizes.iter().all(|&s| small(s))
            || inputs.iter().any(|v| gpu_storage(v).buffer().size() > limit || !small(v.layout.max_extent()))
            || self.repr.buffer_bytes(dtype, plan.total) > limit
        {
            return None;
        }
        Some(self.conv_pass(&plan, &geom, dtype, inputs))
    }

    fn conv_pass(&self, plan: &Plan, geom: &ConvGeometry, dtype: DType, inputs: &[Strided]) -> Result<Vec<Storage>> {
        let gpu = self.gpu()?;
        // The a operand: the weights permuted (unless already in that order), or dy.
        let permuted = (plan.pass != Pass::Weight).then(|| permuted_weight(geom, inputs[1].layout, plan.pass));
        let copy = match &permuted {
            Some(l) if !l.is_contiguous() => Some(self.copy_view(Strided { storage: inputs[1].storage, layout: l, dtype })?),
            _ => None,
        };
        let (a_buf, a_off, b) = match (plan.pass, &copy) {
            (Pass::Weight, _) => (gpu_storage(&inputs[0]).buffer(), inputs[0].layout.offset(), &inputs[1]),
            (_, Some(c)) => (wgpu_buffer(c), 0, &inputs[0]),
            (_, None) => (gpu_storage(&inputs[1]).buffer(), inputs[1].layout.offset(), &inputs[0]),
        };
        let b_off = b.layout.offset();
        let l = geom.out_h() * geom.out_w();
        let a4 = a_off.is_multiple_of(4) && if plan.pass == Pass::Weight { l.is_multiple_of(4) } else { plan.k.is_multiple_of(4) };
        // The weight gradient has few tiles (O/G x C/G kh kw) and a long K: it keeps to 64 x 64
        // tiles and splits K instead.
        let tile = if plan.pass != Pass::Weight && plan.m > 64 && plan.m.div_ceil(128) * plan.n.div_ceil(128) * geom.groups >= BIG_TILES { 128 } else { 64 };
        let tiles = (plan.m.div_ceil(tile) * plan.n.div_ceil(tile) * geom.groups).max(1);
        let mut splits = if tiles < FEW_TILES { SPLIT_TILES.div_ceil(tiles).min(plan.k / MIN_SPLIT_K).max(1) } else { 1 };
        // The partial sums stay within one binding.
        let limit = gpu.max_binding() as usize;
        while splits > 1 && splits * plan.total * 4 > limit {
            splits /= 2;
        }
        let ks = plan.k.div_ceil(splits).next_multiple_of(16).max(16);
        let splits = plan.k.div_ceil(ks).max(1);
        let out4 = plan.p.is_multiple_of(4);
        let key = Key { pass: plan.pass, dtype, h: tile as u32 / 64, a4, aligned: plan.aligned, out4, partial: splits > 1 };
        let (kh, kw) = geom.kernel;
        let mut words = vec![0usize; 52];
        words[..4].copy_from_slice(&[geom.groups, plan.m, plan.k, plan.n]);
        words[5] = plan.k;
        words[6] = 1;
        words[14] = splits;
        words[15] = ks;
        let geo =
            [geom.n, geom.c, geom.h, geom.w, geom.o, kh, kw, geom.stride.0, geom.stride.1, geom.padding.0, geom.padding.1, geom.dilation.0, geom.dilation.1];
        words[16..29].copy_from_slice(&geo);
        words[29..32].copy_from_slice(&[geom.out_h(), geom.out_w(), geom.groups]);
        words[32..36].copy_from_slice(&[b_off, a_off, plan.p, plan.rs]);
        words[36..39].copy_from_slice(&plan.strides);
        words[39] = plan.total;
        words[40..47].copy_from_slice(&plan.gather);
        words[47..52].copy_from_slice(&[l, geom.o * l, geom.c * geom.h * geom.w, geom.h * geom.w, kh * kw]);
        let meta: Vec<u32> = words.iter().map(|&w| u32::try_from(w).expect("sizes checked below i32::MAX")).collect();
        let out = self.output(dtype, plan.total)?;
        let groups = |count: usize| count.clamp(1, 65_535) as u32;
        let grid = (groups(plan.n.div_ceil(tile)), groups(plan.m.div_ceil(tile)), groups(geom.groups * splits));
        let kernel = gpu.kernel(key)?;
        let b_buf = gpu_storage(b).buffer();
        if splits == 1 {
            gpu.dispatch(&kernel, &meta, &[a_buf, b_buf, out.buffer()], grid)?;
        } else {
            let partials = gpu.alloc((splits * plan.total * 4) as u64)?;
            gpu.dispatch(&kernel, &meta, &[a_buf, b_buf, partials.buffer()], grid)?;
            self.sum_partials(dtype, splits, plan.total, partials.buffer(), out.buffer())?;
        }
        Ok(vec![Arc::new(out) as Storage])
    }
}

/// The buffer of a storage this backend made.
fn wgpu_buffer(s: &Storage) -> &wgpu::Buffer {
    s.as_any().downcast_ref::<WgpuStorage>().expect("the copy kernel returns this backend's storage").buffer()
}
