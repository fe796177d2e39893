//! How a convolution pass runs ([`conv()`]): as Winograd (f32 and widened bf16 3x3 layers,
//! `plan/winograd.rs`), through a column buffer (f32 input gradients mostly in the padding,
//! `plan/fold.rs`), or as implicit GEMM on the tensor cores or the tiled kernel, cut into tiles
//! and splits of K.

use std::fmt;

use liandan_tensor::{ConvGeometry, DType};

use super::conv_cut::cut;
use super::phases::{input_phases, one_dispatch, Gemm};
use super::{coop_k_splits, fold, winograd, Caps, Options, Pass, Variant, Winograd};

/// How a set of products is cut: `bm x bn` tiles, K in `splits` ranges, and the variant of
/// the cooperative-matrix kernel that runs them, if one does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tiling {
    pub(crate) bm: usize,
    pub(crate) bn: usize,
    pub(crate) splits: usize,
    pub(crate) coop: Option<Variant>,
}

impl Tiling {
    /// Whether products of `dtype` cut so add a forward's bias in the kernel: finished sums (not
    /// partial ones), on the tiled kernel or as the tensor cores' f16 results are stored (not
    /// scaled ones, whose scales come back as they are stored); elsewhere the bias is a
    /// broadcast add after.
    pub(crate) fn bias_in_kernel(self, dtype: DType) -> bool {
        self.splits == 1 && (self.coop.is_none() || dtype == DType::F16)
    }
}

/// One convolution pass as the launcher sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvCall {
    pub(crate) pass: Pass,
    pub(crate) geom: ConvGeometry,
    pub(crate) dtype: DType,
    /// The operands are two (no bias), each contiguous: what Winograd and the columns read.
    pub(crate) plain: bool,
    /// The operands are bf16 packed two to a word.
    pub(crate) packed: bool,
    /// The largest operand's buffer, in bytes, and the furthest element any operand's view
    /// reaches.
    pub(crate) operand_bytes: u64,
    pub(crate) operand_reach: usize,
}

impl ConvCall {
    /// A pass whose operands are as small as its geometry allows (what the plan tests read).
    #[cfg(test)]
    pub(crate) fn new(pass: Pass, geom: ConvGeometry, dtype: DType, plain: bool) -> ConvCall {
        ConvCall { pass, geom, dtype, plain, packed: false, operand_bytes: 0, operand_reach: 0 }
    }
}

/// Why a pass runs as the tensor layer's composite rather than a kernel of this backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Composite {
    /// f64, or a type this adapter does not compute in.
    Dtype,
    /// An index past the kernels' signed 32-bit addressing, a packed tap shift past 16 bits,
    /// or a buffer past one binding.
    Size,
    /// An input gradient mostly in the padding, through the column buffer (`plan/fold.rs`).
    Columns,
}

/// What a convolution pass runs on, tried in this order: the tensor layer's composite where
/// `composite` says the kernels cannot run it, Winograd as `winograd` says (a launcher whose
/// offsets pass 32 bits goes on), the composite through the columns where `composite` says
/// so, else the implicit GEMM cut as `tiling`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvPlan {
    pub(crate) composite: Option<Composite>,
    pub(crate) winograd: Option<Winograd>,
    pub(crate) tiling: Tiling,
    /// The rule's cut `(tile, splits)`, which the autotune may replace; `None`: it may not
    /// (tensor cores, packed bf16, a cut forced by a test).
    pub(crate) tunable: Option<(usize, usize)>,
}

/// The plan of pass `c` on an adapter with `caps` under `options`: `tuned`, the autotune's cut
/// `(tile, splits)` where it has measured one for a [`ConvPlan::tunable`] pass.
pub(crate) fn conv(c: &ConvCall, caps: &Caps, options: &Options, tuned: Option<(usize, usize)>) -> ConvPlan {
    let ConvCall { pass, geom, dtype, plain, packed, .. } = *c;
    let whole = Gemm::new(pass, &geom);
    // Where the tensor cores would not run the pass (and for f16 weight gradients in one chunk,
    // even where they would): Winograd where the rule (or the setting) wants it; an input
    // gradient mostly in the padding through the columns.
    let off_coop = tiling(caps, options, &whole, &geom, dtype, (whole.n, whole.k), 1).coop.is_none();
    // A tensor-core cut asked for (`coop_cut`) times the tensor cores, so it keeps Winograd off.
    let asked = !off_coop && asked_coop(options).is_some();
    let winograd = winograd::wanted(options, pass, &geom, dtype, plain, caps.max_binding)
        .filter(|&tile| !asked && (off_coop || f16_weight_in_one_chunk(pass, &geom, dtype, tile, caps, options)));
    let composite = if !caps.computes(dtype) || dtype == DType::F64 {
        Some(Composite::Dtype)
    } else if !addressable(c, caps) {
        Some(Composite::Size)
    } else if off_coop && pass == Pass::Input && fold::wanted(options, &geom, dtype, plain) {
        Some(Composite::Columns)
    } else {
        None
    };
    let rule = match pass {
        // The phases share one output, so one cut, chosen for the largest of them; where they
        // run in one dispatch, its tiles are all of theirs.
        Pass::Input => {
            let phases = input_phases(&geom);
            let gemms: Vec<Gemm> = phases.iter().map(|ph| Gemm::input(&geom, ph)).collect();
            let (n, k) = gemms.iter().fold((0, 0), |(n, k), p| (n.max(p.n), k.max(p.k)));
            let together = if one_dispatch(&geom, packed).is_some() { phases.len() } else { 1 };
            tiling(caps, options, &gemms[0], &geom, dtype, (n, k), together)
        }
        _ => tiling(caps, options, &whole, &geom, dtype, (whole.n, whole.k), 1),
    };
    let tunable = (rule.coop.is_none() && !packed && options.conv_cut.is_none()).then_some((rule.bm, rule.splits));
    let tiling = match tuned.filter(|_| tunable.is_some()) {
        Some((tile, splits)) => Tiling { bm: tile, bn: tile, splits, coop: None },
        None => rule,
    };
    let runs = !matches!(composite, Some(Composite::Dtype | Composite::Size));
    let winograd = winograd.filter(|_| runs).map(|tile| Winograd::new(pass, &geom, tile, caps.max_binding, options.winograd_chunk));
    ConvPlan { composite, winograd, tiling, tunable }
}

/// Whether an f16 weight gradient the tensor cores would take runs as Winograd instead: where
/// its images go in one chunk. On the H200 resnet18's f16 step took 9.08 ms so against 9.26 on
/// the tensor cores; seed003_cnn's weight gradient, in two chunks, raised its peak 75 -> 103 MiB
/// for no time.
fn f16_weight_in_one_chunk(pass: Pass, geom: &ConvGeometry, dtype: DType, tile: winograd::Tile, caps: &Caps, options: &Options) -> bool {
    dtype == DType::F16 && pass == Pass::Weight && Winograd::new(pass, geom, tile, caps.max_binding, options.winograd_chunk).chunks == 1
}

/// Whether the kernels can address pass `c`: every index within signed 32 bits (the gather
/// loaders' sums), the weight gradient's packed tap shifts within 16 bits each, and every
/// operand and the output within one binding.
fn addressable(c: &ConvCall, caps: &Caps) -> bool {
    let (g, gemm) = (&c.geom, Gemm::new(c.pass, &c.geom));
    let small = |v: usize| v < i32::MAX as usize;
    let span = |k: usize, d: usize| (k - 1) * d;
    let packs = span(g.kernel.0, g.dilation.0) + g.h + g.padding.0 < 65_535 && span(g.kernel.1, g.dilation.1) + g.w + g.padding.1 < 65_535;
    let (stride, dilation) = (g.stride.0.saturating_mul(g.w).max(g.stride.1), g.dilation.0.max(g.dilation.1));
    let sizes =
        [gemm.total, gemm.m * gemm.k * g.groups, gemm.k * gemm.n, g.input_shape().iter().product(), g.output_shape().iter().product(), stride, dilation];
    let out_bytes = (gemm.total as u64).saturating_mul(caps.gpu_size(c.dtype) as u64).max(4).checked_next_multiple_of(4).unwrap_or(u64::MAX);
    packs && sizes.into_iter().all(small) && small(c.operand_reach) && c.operand_bytes <= caps.max_binding && out_bytes <= caps.max_binding
}

/// The tiling of the products of `gemm`'s pass (the largest of them `n` wide and `k` deep,
/// `together` of them in one dispatch, whose tiles fill the GPU together): on cooperative matrices where the device runs f16 matmuls on them, for kernels larger than
/// 1x1, in a forward or input gradient whose gathered channels per group are a multiple of 32
/// (a slice's rows then share one tap), on 64-row tiles where it has at most 64 rows, and in a
/// weight gradient with at least 128 output channels per group (a tile's rows); K split as
/// the tensor cores' products split theirs (`coop_k_splits`, the partial sums within one
/// binding). Everything else as `conv_cut.rs`
/// says. On the H200 the tensor cores took resnet18's 3x3 passes that qualify 0.40-0.90x as
/// long as the tiled kernel, and those left out 1.2-2.4x as long: the 3-channel stem's forward
/// (a per-element gather), the 1x1 shortcuts, and weight gradients of 64 outputs (1.3-1.7x
/// even on 64-row tiles). A weight gradient whose dy does not read in vec4s (output pixels not
/// a multiple of 4) reads it an element at a time there: seed003_cnn's 11 x 11 outputs, 218 us
/// a call in f16 against the tiled kernel's 479.
fn tiling(caps: &Caps, options: &Options, gemm: &Gemm, geom: &ConvGeometry, dtype: DType, (n, k): (usize, usize), together: usize) -> Tiling {
    let limit = caps.max_binding as usize;
    // Products run in one dispatch count as groups of one product.
    let (pass, m, groups, total) = (gemm.pass, gemm.m, geom.groups * together, gemm.total);
    let asked = asked_coop(options);
    let fits = geom.kernel != (1, 1)
        && match pass {
            // From 64 rows where a tensor-core cut is asked for, so that it can be timed there.
            Pass::Weight => m >= 128 || (m >= 64 && asked.is_some()),
            _ => gemm.gather[0].is_multiple_of(32),
        };
    if let Some(chosen) = caps.coop.filter(|_| fits && on_tensor_cores(caps, options, dtype, 2 * m * n * k * geom.groups)) {
        let variant = asked.map_or_else(|| Variant::for_pass(chosen, m), |(v, _)| v);
        let (bm, bn) = variant.tile();
        let tiles = (m.div_ceil(bm) * n.div_ceil(bn) * groups * variant.weight()).max(1);
        // An asked split keeps at least one 32-deep slice a range.
        let mut splits = asked.map_or_else(|| coop_k_splits(tiles, k, total), |(_, s)| s.min(k.div_ceil(32)).max(1));
        while splits > 1 && splits.saturating_mul(total).saturating_mul(4) > limit {
            splits /= 2;
        }
        return Tiling { bm, bn, splits, coop: Some(variant) };
    }
    let (tile, splits) = cut(pass, m, n, k, groups, total, limit, options.conv_cut);
    // A strided 1x1 kernel's input gradient clears every pixel (most phases have no tap); split,
    // it would clear and then sum f32 partials of every pixel, more than a 2-byte output saves.
    let cleared = pass == Pass::Input && geom.kernel == (1, 1) && geom.stride != (1, 1) && dtype.size_in_bytes() < 4;
    let splits = if cleared && options.conv_cut.is_none() { 1 } else { splits };
    Tiling { bm: tile, bn: tile, splits, coop: None }
}

/// The tensor-core layout and splits of K that `Knobs::coop_cut` asks every pass on the tensor
/// cores to take (so that each can be timed on any pass), where a variant has that tile.
fn asked_coop(options: &Options) -> Option<(Variant, usize)> {
    let (tile, splits) = options.coop_cut?;
    Some((Variant::for_tile(tile)?, splits.max(1)))
}

/// Whether a pass of `dtype` and `flops` operations may run on the tensor-core kernels: f16
/// where the f16 matmul does; bf16 there too where it has at least [`TF32_MIN_FLOPS`] (scaled
/// into f16 as TF32 is, see `conv.rs`: a bf16 value's 8 significant bits fit f16's 11, so
/// only values under about 2^-32 of the operand's largest lose bits); f32 the same under
/// `conv_tf32`.
fn on_tensor_cores(caps: &Caps, options: &Options, dtype: DType, flops: usize) -> bool {
    if caps.coop_in(dtype).is_some() {
        return true;
    }
    let large = flops >= TF32_MIN_FLOPS || options.tf32_any_size;
    let scaled = match dtype {
        DType::BF16 => true,
        DType::F32 => options.conv_tf32,
        _ => false,
    };
    scaled && large && caps.coop.is_some()
}

/// The least work (2 M N K) of an f32 pass scaled onto the tensor cores. Smaller ones stay on
/// the tiled f32 kernel: on the H200 mnist_cnn's second convolution (1.4 GFLOP forward, 1.6 its
/// input gradient) ran 1.4x and 1.06x as long there, the scans of the operands and the bias
/// added after not paid back, while every pass from 9 GFLOP up (resnet18's 3x3 layers,
/// seed003_cnn's second convolution) ran 1.5-2.5x faster.
const TF32_MIN_FLOPS: usize = 1 << 31;

/// The route in a line, as the plan tests read it: `winograd F2`, `winograd F4 in 2 chunks`,
/// `composite (Size)`, `columns`, `implicit 128x128 /3` (K in 3 ranges), `coop Tall 256x128 /1`.
impl fmt::Display for ConvPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Tiling { bm, bn, splits, coop } = self.tiling;
        match (self.composite, self.winograd, coop) {
            (Some(why @ (Composite::Dtype | Composite::Size)), ..) => write!(f, "composite ({why:?})"),
            (_, Some(w), _) if w.chunks > 1 => write!(f, "winograd {:?} in {} chunks", w.tile, w.chunks),
            (_, Some(w), _) => write!(f, "winograd {:?}", w.tile),
            (Some(Composite::Columns), ..) => write!(f, "columns"),
            (None, None, Some(v)) => write!(f, "coop {v:?} {bm}x{bn} /{splits}"),
            (None, None, None) => write!(f, "implicit {bm}x{bn} /{splits}"),
        }
    }
}
