//! How a batched product runs ([`matmul()`]): on the tiled kernel (`shaders/matmul.wgsl`) in
//! 64 x 64 or 128 x 128 tiles, on the tensor cores (f16, and packed bf16 scaled into f16, where
//! the adapter has them), on the one-dispatch kernel of a small product, on the one-tile kernel
//! of a batch of small products, after a copy of its rhs, or on the CPU; and into how many
//! ranges K is split.

use liandan_tensor::DType;

use super::{Caps, Load, Options, Variant};

/// Whether a product (matmul's or a convolution's) writes y as packed bf16: its operands are
/// packed, it writes y in vec4s (a word pair an invocation's alone) and K is not split.
pub(crate) fn packs_y(packed: bool, out4: bool, partial: bool) -> bool {
    packed && out4 && !partial
}

/// Tiles of 128 x 128 once there are this many of them (else 64 x 64 keeps more of the GPU busy).
const BIG_TILES: usize = 192;
/// With fewer tiles than `FEW_TILES` (a big GPU runs two per compute unit at once), K is split
/// so that there are some `SPLIT_TILES` workgroups, into ranges of at least `MIN_SPLIT_K`; a
/// small product (at most `SHORT_OUTPUTS` outputs, whose time is its latency) into ranges of
/// at least `MIN_SHORT_K`, up to `SHORT_SPLITS` of them, where that gives four or more. On the
/// H200 the LSTM's recurrent `[64, 1024] x [1024, 256]` took 18.7 us a call in 16 ranges of 64
/// against 27.8 in 4 of 256, and `[64, 256] x [256, 1024]` 18.1 against 21.1 unsplit; larger
/// outputs (`[1024, 1728] x [1728, 256]`, `[64, 128] x [128, 9216]`) and K of 128 were slower
/// in ranges of 64.
const FEW_TILES: usize = 256;
const SPLIT_TILES: usize = 512;
/// A product whose K is at least `LONG_K` (a weight gradient over a large batch) splits it
/// towards `LONG_SPLIT_TILES` workgroups: on the H100 a ViT's f32 step (weight gradients of K =
/// 8,320 on 9 to 36 tiles) took 7.18-7.20 ms so against 7.31-7.36 towards 512, and 7.24-7.33
/// towards 2,048.
const LONG_K: usize = 4096;
const LONG_SPLIT_TILES: usize = 1024;
const MIN_SPLIT_K: usize = 256;
const SHORT_OUTPUTS: usize = 64 * 1024;
const MIN_SHORT_K: usize = 64;
const SHORT_SPLITS: usize = 32;

/// The ranges K is split into for a product on the ordinary kernels of `tiles` workgroups and
/// `outputs` elements (see `FEW_TILES`); products and convolutions on cooperative matrices
/// split theirs by [`coop_k_splits`].
pub(crate) fn k_splits(tiles: usize, k: usize, outputs: usize) -> usize {
    if tiles >= FEW_TILES {
        return 1;
    }
    let short = k / MIN_SHORT_K;
    let short = if outputs <= SHORT_OUTPUTS && short >= 4 { short.min(SHORT_SPLITS) } else { 0 };
    let aim = if k >= LONG_K { LONG_SPLIT_TILES } else { SPLIT_TILES };
    aim.div_ceil(tiles).min((k / MIN_SPLIT_K).max(short)).max(1)
}

/// Weighted tiles ([`Variant::weight`]) in one wave of the tensor-core kernels: the H200's 132
/// compute units, each holding one 512-invocation workgroup (two weighted tiles). A product of
/// fewer splits K into as many ranges as keep it within that wave, each `MIN_SPLIT_K` deep or
/// more (`MIN_SHORT_COOP_K` where the outputs are few, `SHORT_OUTPUTS`, and their partial sums
/// cheap): a second, partial wave costs more than the shallower ranges save. On the H200 a
/// ViT's f16 weight gradient `[576, 8320] x [8320, 192]` (6 tiles of 256 x 128) took 34.5 us in
/// 22 ranges (132 workgroups), 38.2 in 16, 52.3 in 24 (144) and 48.3 in 32; `[192, 8320] x
/// [8320, 192]` 24.1 in 52 ranges against 28.4 in 32; `[8320, 768] x [768, 192]` (66 tiles)
/// 38.7 in 2 against 44.9 in 1 and 56.8 in 3. The convolutions on the tensor cores split the
/// same way: on the H100 resnet18's f16 step took 7.65 ms so against 7.95 with the ordinary
/// kernels' rule (about twice the ranges), its bf16 step 10.6 against 11.1.
const COOP_WAVE: usize = 264;
const MIN_SHORT_COOP_K: usize = 160;

/// The ranges K is split into for a product on the tensor cores of `tiles` weighted tiles and
/// `outputs` elements (see `COOP_WAVE`).
pub(crate) fn coop_k_splits(tiles: usize, k: usize, outputs: usize) -> usize {
    if tiles >= FEW_TILES {
        return 1;
    }
    let least = if outputs <= SHORT_OUTPUTS { MIN_SHORT_COOP_K } else { MIN_SPLIT_K };
    (COOP_WAVE / tiles.max(1)).min(k / least).max(1)
}

/// A small f32 or f16 product takes the one-dispatch kernel (`shaders/matmul/small.wgsl`)
/// where the tiled kernel would split its K: at most `SHORT_OUTPUTS` outputs, K at most
/// `SMALL_MAX_K`, a read in vec4s along K and b in vec4s along K or N. Its K is split over the
/// invocations of a workgroup, so no second kernel adds partial sums.
const SMALL_MAX_K: usize = 4096;
/// The one-dispatch kernel's blocks of y, rows x columns: 16 x 16 (16 groups of invocations
/// along K), or 8 x 16 (32 groups) where 16 x 16 blocks would be fewer than `SMALL_BLOCKS_MIN`
/// workgroups. On the H200 the LSTM's `[64, 256] x [256, 1024]` took 11.4 us a call in 16 x 16
/// blocks (256 workgroups) against 13.3 in 8 x 16, its `[64, 1024] x [1024, 256]` 10.9 in 8 x
/// 16 (128) against 14.1 in 16 x 16.
pub(crate) const SMALL_BLOCKS: [(u32, u32); 2] = [(16, 16), (8, 16)];
const SMALL_BLOCKS_MIN: usize = 128;

/// Whether a product of `outputs` elements over `k`, loaded as `a` and `b`, that the rule cuts
/// into `splits` ranges of K runs on the one-dispatch kernel (see `SMALL_MAX_K`).
fn takes_small(outputs: usize, k: usize, a: Load, b: Load, splits: usize) -> bool {
    splits > 1 && outputs > 0 && outputs <= SHORT_OUTPUTS && (1..=SMALL_MAX_K).contains(&k) && a == Load::K && b != Load::Strided
}

/// The side of the tile of `shaders/matmul/heads.wgsl`, and the fewest products in a batch
/// that take it: a y[b] of at most `HEADS_TILE` rows and columns, more than 64 of either (so
/// the tiled kernel's 64 x 64 tiles would take two or four for it, or a 128 x 128 one three
/// quarters empty), as a ViT's attention heads of 65 tokens. With fewer products the tiled
/// kernel's several tiles a product spread them over more of the GPU: on the H200 a ViT's QK^T
/// and AV products took 2-7 us less together on the tiled kernel at 16 and 32 heads, 1.3 more
/// to 3.3 less at 48 and 64, and 2-9 more at 80 to 128 (41-46 more at 384).
pub(crate) const HEADS_TILE: usize = 80;
const HEADS_MIN_BATCH: usize = 80;

/// Whether a batch of `batch` products of `m x n` outputs runs one 80 x 80 tile a product
/// (see `HEADS_TILE`).
fn takes_heads(batch: usize, m: usize, n: usize) -> bool {
    batch >= HEADS_MIN_BATCH && m <= HEADS_TILE && n <= HEADS_TILE && (m > 64 || n > 64)
}

/// The shortest K for which a product reading both operands in vec4s along K on 128 x 128
/// tiles (a linear layer's `x W^T`) copies its rhs to `[K, N]` first (see `copies_rhs`).
const RHS_COPY_MIN_K: usize = 384;

/// Whether an f32 product that would stage both operands on 128 x 128 tiles through the
/// loaders that read vec4s along K (each vec4's four values stored down four rows of workgroup
/// memory) runs on a `[K, N]` copy of its rhs instead (N a multiple of 4, so that the copy is
/// read in vec4s along N; a rhs broadcast over the batch is copied once): on the H200 such
/// products ran 20% slower than with either operand read the other way (4096^3: 24.8-25.0
/// TFLOP/s against 30.6-32.9), and with the copy (a transposed copy at some 750 GB/s) `[8320,
/// K] x [K, 768]` ran 7-14% faster at K from 384 to 3,072, 4096^3 23% (30.4); at K = 192
/// within 3%. The copy lives until the product is
/// recorded (a buffer the size of the weight, from the pool). A cut given by the caller is
/// kept as it is.
fn copies_rhs(dtype: DType, [batch, m, k, n]: [usize; 4], loads: (Load, Load), cut: Option<(usize, usize)>) -> bool {
    let big_tiles = m.div_ceil(128) * n.div_ceil(128) * batch >= BIG_TILES;
    cut.is_none() && dtype == DType::F32 && loads == (Load::K, Load::K) && big_tiles && k >= RHS_COPY_MIN_K && n.is_multiple_of(4)
}

/// The dtypes the one-dispatch and one-tile kernels read as stored: f64 stays on the tiled
/// kernel; bf16, packed two to a word at rest (`packed.rs`), takes them with packed loaders.
pub(crate) const SMALL_DTYPES: [DType; 2] = [DType::F32, DType::F16];

/// K in ranges of whole 16-deep slices: `(splits, range)` for a split into `splits`.
pub(crate) fn cut_k(k: usize, splits: usize) -> (usize, usize) {
    let ks = k.div_ceil(splits).next_multiple_of(16).max(16);
    (k.div_ceil(ks).max(1), ks)
}

/// One batched product as the launcher sees it: `batch` products of `[m, k] x [k, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Product {
    pub(crate) dtype: DType,
    pub(crate) batch: usize,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    /// How each operand's slices are staged.
    pub(crate) a: Load,
    pub(crate) b: Load,
    /// A linear layer's bias is added to each column of y.
    pub(crate) bias: bool,
    /// The operands are bf16 packed two to a word (`packed.rs`).
    pub(crate) packed: bool,
    /// A cut `(tile, splits)` the caller knows better than the rule (Winograd's batches).
    pub(crate) cut: Option<(usize, usize)>,
    /// The sizes, strides, offsets and extents of both operands fit 32 bits.
    pub(crate) addressable: bool,
}

impl Product {
    /// Whether a meta block with K cut as [`cut_k`] gives `(splits, range)` fits 32 bits.
    pub(crate) fn meta_fits(&self, (splits, ks): (usize, usize)) -> bool {
        self.addressable && u32::try_from(splits * self.batch * self.m * self.n).is_ok() && u32::try_from(ks).is_ok()
    }
}

/// What a product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatmulPlan {
    /// An f32 product of both operands read along K on 128 x 128 tiles: its rhs is copied to
    /// `[K, N]` first (once where it is broadcast over the batch), and the product planned again.
    CopyRhs,
    /// The one-dispatch kernel (`shaders/matmul/small.wgsl`), in blocks of y `(rows, cols)`.
    Small { block: (u32, u32) },
    /// The one-tile kernel of a batch of small products (`shaders/matmul/heads.wgsl`).
    Heads,
    /// The tiled kernel, or the tensor cores' where `coop`.
    Tiled(Tiled),
    /// The CPU: a dtype this adapter does not compute, or sizes past 32 bits.
    Cpu,
}

/// A product on the tiled kernel (or the tensor cores').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tiled {
    /// The tensor cores' layout, or `None`: the tiled kernel.
    pub(crate) coop: Option<Variant>,
    /// The tile, rows x columns.
    pub(crate) tile: (usize, usize),
    /// The workgroups along K, and K as the meta block cuts it (`(splits, range)`).
    pub(crate) splits: usize,
    pub(crate) k_ranges: (usize, usize),
    /// The bias is added as the kernel stores y, or by the sum of a split K (else a broadcast
    /// add after).
    pub(crate) bias_in_kernel: bool,
    /// y is written as packed bf16 (by the product, or by the sum of a split K).
    pub(crate) packs_y: bool,
    /// The rule's cut `(tile, splits)`, which the autotune may replace; `None`: it may not
    /// (tensor cores, packed bf16).
    pub(crate) tunable: Option<(usize, usize)>,
}

/// The fewest floating-point operations (`2 batch m k n`) an f16 product runs on the tensor
/// cores with; smaller ones run on the ordinary kernels, whose start and end cost less than
/// the tensor cores' tiles. On the H200 every zoo product of at most 2^28 ran faster there:
/// `[1024, 512] x [512, 256]` 35.9 us against 41.8, the lstm's `[1792, 28] x [28, 1024]`
/// 12.8 against 25.3, a ViT's 384 attention heads of `[65, 64] x [64, 65]` 25.6 against 36.5
/// (the one-tile kernel), `[64, 128] x [128, 10]` 17.3 against 27.1. At 2^29.2 (a ViT's
/// products with a 192 x 192 weight) the tensor cores were faster in two of three, from 2^30
/// in every one (the mlp's `[1024, 1024] x [1024, 512]` 44.0 against 62.2).
pub(crate) const COOP_MIN_FLOPS: usize = 1 << 29;

/// The plan of product `p` on an adapter with `caps` and a device with `options`: `tuned`,
/// the autotune's cut `(tile, splits)` where it has measured one for a [`Tiled::tunable`]
/// product.
pub(crate) fn matmul(p: &Product, caps: &Caps, options: &Options, tuned: Option<(usize, usize)>) -> MatmulPlan {
    let Product { dtype, batch, m, k, n, a, b, bias, packed, cut, .. } = *p;
    let large = 2 * batch * m * k * n >= COOP_MIN_FLOPS || options.coop_any_size;
    // Packed bf16 scaled into f16 there (`matmul/coop.rs`).
    let coop_layout = if dtype == DType::BF16 && packed { caps.coop } else { caps.coop_in(dtype) };
    let coop_layout = coop_layout.filter(|_| large);
    let coop = coop_layout.is_some();
    if !coop && !packed && copies_rhs(dtype, [batch, m, k, n], (a, b), cut) {
        return MatmulPlan::CopyRhs;
    }
    // A layout asked for by `Knobs::coop_cut` where the device runs any.
    let asked = options.coop_cut.and_then(|(tile, splits)| Some((Variant::for_tile(tile)?, splits.max(1))));
    let coop_variant = coop_layout.map(|v| asked.map_or_else(|| Variant::for_product(v, [m, k, n]), |(v, _)| v));
    let cut = cut.filter(|_| !coop && !packed && dtype != DType::F64).map(|(tile, splits)| (if tile == 128 { 128 } else { 64 }, splits.max(1)));
    let (tm, tn) = if let Some(v) = coop_variant {
        v.tile()
    } else if let Some((tile, _)) = cut {
        (tile, tile)
    } else if dtype != DType::F64 && m.div_ceil(128) * n.div_ceil(128) * batch >= BIG_TILES {
        (128, 128)
    } else {
        (64, 64)
    };
    let tiles = (m.div_ceil(tm) * n.div_ceil(tn) * batch * coop_variant.map_or(1, Variant::weight)).max(1);
    let outputs = batch * m * n;
    let small_dtype = SMALL_DTYPES.contains(&dtype) && !packed && caps.computes(dtype);
    // The one-dispatch and one-tile kernels read packed bf16 too (and write y unpacked, their
    // stores a scalar an invocation).
    let packed_bf16 = dtype == DType::BF16 && packed && caps.computes(dtype);
    // A small product whose K the tiled kernel would split takes the one-dispatch kernel,
    // in f16 too where the tensor cores would run it (as latency-bound there: the LSTM's
    // f16 products took 22.8-23.6 us a call on them).
    let tiled_splits = k_splits((m.div_ceil(64) * n.div_ceil(64) * batch).max(1), k, outputs);
    if (small_dtype || packed_bf16) && takes_small(outputs, k, a, b, tiled_splits) && p.meta_fits(cut_k(k, 1)) {
        let blocks = |(bm, bn): (u32, u32)| batch * m.div_ceil(bm as usize) * n.div_ceil(bn as usize);
        let block = if blocks(SMALL_BLOCKS[0]) >= SMALL_BLOCKS_MIN { SMALL_BLOCKS[0] } else { SMALL_BLOCKS[1] };
        return MatmulPlan::Small { block };
    }
    if (small_dtype || packed_bf16) && !coop && cut.is_none() && !bias && takes_heads(batch, m, n) && p.meta_fits(cut_k(k, 1)) {
        return MatmulPlan::Heads;
    }
    let asked_splits = asked.filter(|_| coop).map(|(_, splits)| splits);
    let splits = if coop { coop_k_splits(tiles, k, outputs) } else { k_splits(tiles, k, outputs) };
    let rule_k = cut_k(k, cut.or(asked_splits.map(|s| (0, s))).map_or(splits, |(_, splits)| splits.min(k.div_ceil(16))));
    if !caps.computes(dtype) || !p.meta_fits(rule_k) {
        return MatmulPlan::Cpu;
    }
    let rule = (tm, rule_k.0);
    // Packed bf16 operands make a packed y wherever it is written in vec4s (summed over the
    // splits of K, where it is split, by a kernel that packs it).
    let packs_y = packed && n.is_multiple_of(4);
    let tunable = (!coop && !packed).then_some(rule);
    let ((tm, splits), k_ranges) = match tuned.filter(|_| tunable.is_some()) {
        Some(c) if c.1 != rule.1 => (c, cut_k(k, c.1)),
        Some(c) => (c, rule_k),
        None => (rule, rule_k),
    };
    let tile = if coop { (tm, tn) } else { (tm, tm) };
    // The bias goes in the kernel's epilogue where it stores finished sums of its own (on the
    // tensor cores, packed y, or f16 y two columns an invocation where N is even), or in the sum
    // of a split K (f32 and f16 partial sums, or packed y).
    let in_epilogue = splits == 1 && (!coop || (!packed && n.is_multiple_of(2)));
    let in_sum = splits > 1 && !packed && dtype != DType::F64;
    let bias_in_kernel = bias && (packs_y || in_epilogue || in_sum);
    MatmulPlan::Tiled(Tiled { coop: coop_variant, tile, splits, k_ranges, bias_in_kernel, packs_y, tunable })
}

/// Whether an LSTM step of `n` rows and `units` hidden units runs as one fused kernel
/// (`lstm_step.rs`: the recurrent product on the one-dispatch kernel's sums, then the cell):
/// the product is small (see `SMALL_MAX_K`) and h and the weights read in aligned vec4s
/// (`aligned`: their offsets are multiples of 4); else the composite runs.
pub(crate) fn lstm_step(n: usize, units: usize, aligned: bool) -> bool {
    n > 0 && n * 4 * units <= SHORT_OUTPUTS && units <= SMALL_MAX_K && units.is_multiple_of(4) && aligned
}

/// The route in a line, as the plan tests read it: `small 16x16` (blocks of y), `heads`,
/// `tiled 128x128 /3` (K in 3 ranges; `+bias`: added in the kernel), `coop Tall 256x128 /1`,
/// `rhs copy`, `cpu`.
impl std::fmt::Display for MatmulPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatmulPlan::CopyRhs => write!(f, "rhs copy"),
            MatmulPlan::Small { block: (bm, bn) } => write!(f, "small {bm}x{bn}"),
            MatmulPlan::Heads => write!(f, "heads"),
            MatmulPlan::Cpu => write!(f, "cpu"),
            MatmulPlan::Tiled(t) => {
                let ((tm, tn), bias) = (t.tile, if t.bias_in_kernel { " +bias" } else { "" });
                match t.coop {
                    Some(v) => write!(f, "coop {v:?} {tm}x{tn} /{}{bias}", t.splits),
                    None => write!(f, "tiled {tm}x{tn} /{}{bias}", t.splits),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::k_splits;

    /// The cuts that ran faster on the H200, and the products that keep ranges of 256 because
    /// ranges of 64 ran slower there.
    #[test]
    fn small_products_split_into_short_ranges() {
        assert_eq!(k_splits(16, 256, 64 * 1024), 4, "[64, 256] x [256, 1024] in 64 x 64 tiles");
        assert_eq!(k_splits(4, 1024, 64 * 256), 16, "[64, 1024] x [1024, 256]");
        assert_eq!(k_splits(2, 512, 128 * 10), 8, "[128, 512] x [512, 10]");
        assert_eq!(k_splits(1, 256, 64 * 10), 4, "[64, 256] x [256, 10]");
        // Large outputs, or K too short for four ranges of 64: as before.
        assert_eq!(k_splits(64, 1728, 1024 * 256), 6, "[1024, 1728] x [1728, 256]");
        assert_eq!(k_splits(144, 128, 64 * 9216), 1, "[64, 128] x [128, 9216]");
        assert_eq!(k_splits(1, 128, 64 * 10), 1, "[64, 128] x [128, 10]");
        assert_eq!(k_splits(2, 9216, 64 * 128), 36, "[64, 9216] x [9216, 128]: ranges of 256 already");
        assert_eq!(k_splits(256, 1 << 20, 64), 1, "tiles enough to fill the GPU");
        // A long K splits towards twice the workgroups.
        assert_eq!(k_splits(36, 8320, 192 * 768), 29, "[192, 8320] x [8320, 768]");
        assert_eq!(k_splits(27, 8320, 576 * 192), 32, "[576, 8320] x [8320, 192]: ranges of 256");
        assert_eq!(k_splits(36, 4095, 192 * 768), 15, "[192, 4095] x [4095, 768]: towards 512");
    }

    /// The tensor cores' splits keep a product within one wave of the H200's workgroups.
    #[test]
    fn tensor_core_products_split_within_one_wave() {
        use super::coop_k_splits;
        // Weighted tiles: two per 256 x 128 tile.
        assert_eq!(coop_k_splits(12, 8320, 576 * 192), 22, "[576, 8320] x [8320, 192]: 132 workgroups");
        assert_eq!(coop_k_splits(4, 8320, 192 * 192), 52, "[192, 8320] x [8320, 192]: few outputs, ranges of 160");
        assert_eq!(coop_k_splits(132, 768, 8320 * 192), 2, "[8320, 768] x [768, 192]");
        assert_eq!(coop_k_splits(132, 192, 8320 * 192), 1, "[8320, 192] x [192, 192]: K too short");
        assert_eq!(coop_k_splits(144, 768, 8320 * 192), 1, "a second wave would start");
        assert_eq!(coop_k_splits(32, 1024, 1024 * 512), 4, "[1024, 1024] x [1024, 512]: ranges of 256");
        assert_eq!(coop_k_splits(330, 192, 8320 * 576), 1, "[8320, 192] x [192, 576]: more than a wave already");
    }
}
