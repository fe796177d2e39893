//! Batched matrix multiplication: a tiled kernel with register blocking (`shaders/matmul.wgsl`),
//! reading each operand through its strides, or in vec4s where its inner dimension allows.
//!
//! The loaders are picked per operand at run time: vec4s along K for a row-major lhs or a
//! transposed rhs (a linear layer's weight), vec4s along M / N for the other orientation, and
//! scalar loads through any strides (broadcast, narrowed, odd sizes) otherwise. f16 and bf16
//! accumulate in f32; f64 without SHADER_F64 runs on the CPU. f16 runs on cooperative matrices
//! (tensor cores, `matmul_coop.rs`) where the device has them, on the same operands and splits.
//! A small f32 or f16 product whose K the tiled kernel would split over workgroups runs instead
//! as one dispatch that splits K inside a workgroup (`shaders/matmul/small.wgsl`,
//! `takes_small`), and a batch of products each a little larger than a 64 x 64 tile (a ViT's
//! 65-token attention heads) one 80 x 80 tile a product (`shaders/matmul/heads.wgsl`,
//! `takes_heads`).

use std::sync::Arc;

use liandan_tensor::{DType, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{KernelKey, Wgsl};
use crate::launch::WIDE;
use crate::matmul_coop;
use crate::packed::{packed_view, with_words};
use crate::params::words;
use crate::repr::Repr;
use crate::tune::Shape;

const MATMUL: &str = include_str!("shaders/matmul.wgsl");
const BIAS: &str = include_str!("shaders/matmul/bias.wgsl");
/// The epilogue of a product without a bias, which the convolutions share.
pub(crate) const NO_BIAS: &str = include_str!("shaders/matmul/no_bias.wgsl");
pub(crate) const ENTRY: &str = include_str!("shaders/matmul/entry.wgsl");
/// The tiled product and the strided lhs loaders, which the convolutions share.
pub(crate) const TILE: &str = include_str!("shaders/matmul/tile.wgsl");
pub(crate) const LOAD_A: &str = include_str!("shaders/matmul/load_a.wgsl");
const SMALL: &str = include_str!("shaders/matmul/small.wgsl");
/// The small products' sums (shared with the LSTM step's kernel).
pub(crate) const SMALL_SUMS: &str = include_str!("shaders/matmul/small_sums.wgsl");
const HEADS: &str = include_str!("shaders/matmul/heads.wgsl");

crate::shader_params! {
    /// A product's block (`shaders/matmul.wgsl`): y[b] = a[b] x b[b] for `batch` products of
    /// a `[m, k]` by b `[k, n]`, each operand's strides and offset; `a_walk_m` / `b_walk_n`:
    /// whether the scalar loaders walk along M / N rather than K; K cut into `splits` ranges of
    /// `split_k`; the bias's offset where the kernel adds one. The convolutions' block
    /// (`conv.rs`) opens with the same fields up to `split_k`, which the shared parts read.
    pub(crate) struct MatmulParams {
        pub batch: u32,
        pub m: u32,
        pub k: u32,
        pub n: u32,
        pub a_stride_b: u32,
        pub a_stride_m: u32,
        pub a_stride_k: u32,
        pub a_offset: u32,
        pub b_stride_b: u32,
        pub b_stride_k: u32,
        pub b_stride_n: u32,
        pub b_offset: u32,
        pub a_walk_m: u32,
        pub b_walk_n: u32,
        pub splits: u32,
        pub split_k: u32,
        pub bias_offset: u32,
    }
}

/// How one operand's slices are staged: vec4s along K, vec4s along its other dimension (M of
/// the lhs, N of the rhs), or scalars through any strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Load {
    K,
    Outer,
    Strided,
}

/// One compiled variant: `h` = 1 gives 64 x 64 tiles, 2 gives 128 x 128; `partial`: the
/// kernel writes unrounded partial sums over a split of K, for `reduce` to add up; `packed`:
/// a and b are bf16 held two to a word (`packed.rs`), widened as they are read, and y is
/// written packed too where it is written whole in vec4s ([`Variant::packs_y`]); `bias`: a
/// linear layer's bias is added to each column as y is stored (finished sums only, never
/// packed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Variant {
    h: u32,
    a: Load,
    b: Load,
    out4: bool,
    partial: bool,
    packed: bool,
    bias: bool,
}

impl Variant {
    fn packs_y(&self) -> bool {
        packs_y(self.packed, self.out4, self.partial)
    }
}

/// Whether a product (matmul's or a convolution's) writes y as packed bf16: its operands are
/// packed, it writes y in vec4s (a word pair an invocation's alone) and K is not split.
pub(crate) fn packs_y(packed: bool, out4: bool, partial: bool) -> bool {
    packed && out4 && !partial
}

/// The binding and reads of the a operand (`fetch_a`, `fetch_a4`): in vec4s or scalars, as
/// stored or packed bf16. The convolutions share them.
pub(crate) fn read_a(vec4: bool, packed: bool) -> &'static str {
    match (vec4, packed) {
        (false, false) => include_str!("shaders/matmul/read_a.wgsl"),
        (true, false) => include_str!("shaders/matmul/read_a4.wgsl"),
        (false, true) => include_str!("shaders/matmul/read_a_packed.wgsl"),
        (true, true) => include_str!("shaders/matmul/read_a4_packed.wgsl"),
    }
}

/// The binding and stores of y (`store_y4`, `store_y`): in vec4s or scalars, and where
/// `packed` (with vec4s only, whose words are one invocation's alone) as packed bf16.
pub(crate) fn write_y(vec4: bool, packed: bool) -> &'static str {
    match (vec4, packed) {
        (false, _) => include_str!("shaders/matmul/write.wgsl"),
        (true, false) => include_str!("shaders/matmul/write4.wgsl"),
        (true, true) => include_str!("shaders/matmul/write4_packed.wgsl"),
    }
}

/// [`read_a`] for the b operand.
pub(crate) fn read_b(vec4: bool, packed: bool) -> &'static str {
    match (vec4, packed) {
        (false, false) => include_str!("shaders/matmul/read_b.wgsl"),
        (true, false) => include_str!("shaders/matmul/read_b4.wgsl"),
        (false, true) => include_str!("shaders/matmul/read_b_packed.wgsl"),
        (true, true) => include_str!("shaders/matmul/read_b4_packed.wgsl"),
    }
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
const MIN_SPLIT_K: usize = 256;
pub(crate) const SHORT_OUTPUTS: usize = 64 * 1024;
const MIN_SHORT_K: usize = 64;
const SHORT_SPLITS: usize = 32;

/// The ranges K is split into for a product of `tiles` workgroups and `outputs` elements (see
/// `FEW_TILES`); the convolutions on cooperative matrices split theirs the same way.
pub(crate) fn k_splits(tiles: usize, k: usize, outputs: usize) -> usize {
    if tiles >= FEW_TILES {
        return 1;
    }
    let short = k / MIN_SHORT_K;
    let short = if outputs <= SHORT_OUTPUTS && short >= 4 { short.min(SHORT_SPLITS) } else { 0 };
    SPLIT_TILES.div_ceil(tiles).min((k / MIN_SPLIT_K).max(short)).max(1)
}

/// A small f32 or f16 product takes the one-dispatch kernel (`shaders/matmul/small.wgsl`)
/// where the tiled kernel would split its K: at most `SHORT_OUTPUTS` outputs, K at most
/// `SMALL_MAX_K`, a read in vec4s along K and b in vec4s along K or N. Its K is split over the
/// invocations of a workgroup, so no second kernel adds partial sums.
pub(crate) const SMALL_MAX_K: usize = 4096;
/// The one-dispatch kernel's blocks of y, rows x columns: 16 x 16 (16 groups of invocations
/// along K), or 8 x 16 (32 groups) where 16 x 16 blocks would be fewer than `SMALL_BLOCKS_MIN`
/// workgroups. On the H200 the LSTM's `[64, 256] x [256, 1024]` took 11.4 us a call in 16 x 16
/// blocks (256 workgroups) against 13.3 in 8 x 16, its `[64, 1024] x [1024, 256]` 10.9 in 8 x
/// 16 (128) against 14.1 in 16 x 16.
const SMALL_BLOCKS: [(u32, u32); 2] = [(16, 16), (8, 16)];
const SMALL_BLOCKS_MIN: usize = 128;

/// Whether a product of `outputs` elements over `k`, loaded as `a` and `b`, that the rule cuts
/// into `splits` ranges of K runs on the one-dispatch kernel (see `SMALL_MAX_K`).
fn takes_small(outputs: usize, k: usize, a: Load, b: Load, splits: usize) -> bool {
    splits > 1 && outputs > 0 && outputs <= SHORT_OUTPUTS && (1..=SMALL_MAX_K).contains(&k) && a == Load::K && b != Load::Strided
}

/// The one-dispatch kernel of a small product: its dtype (f32, or f16 summed in f32),
/// b's loader (vec4s along K or N), whether a linear layer's bias is added as y is stored, and
/// the block of y a workgroup computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SmallKey {
    dtype: DType,
    b: Load,
    bias: bool,
    block: (u32, u32),
}

/// The dtypes of the one-dispatch kernel: f64 stays on the tiled kernel, and bf16, packed two
/// to a word at rest (`packed.rs`), on the tiled kernel's packed loaders.
const SMALL_DTYPES: [DType; 2] = [DType::F32, DType::F16];

impl KernelKey for SmallKey {
    fn source(&self, repr: &Repr) -> String {
        let b_load = if self.b == Load::K { 0 } else { 1 };
        let w = Wgsl::new(repr).params::<MatmulParams>().ty("x", self.dtype).uint("B_LOAD", b_load).uint("BM", self.block.0).uint("BN", self.block.1);
        let epilogue = if self.bias { BIAS } else { NO_BIAS };
        let parts =
            [read_a(true, false), read_b(true, false), include_str!("shaders/matmul/out_rounded.wgsl"), write_y(false, false), epilogue, SMALL_SUMS, SMALL];
        parts.into_iter().fold(w, Wgsl::part).build()
    }

    fn all(repr: &Repr) -> Vec<SmallKey> {
        let mut out = Vec::new();
        for dtype in SMALL_DTYPES.into_iter().filter(|&d| repr.computes(d)) {
            for b in [Load::K, Load::Outer] {
                for bias in [false, true] {
                    out.extend(SMALL_BLOCKS.map(|block| SmallKey { dtype, b, bias, block }));
                }
            }
        }
        out
    }
}

/// The side of the tile of `shaders/matmul/heads.wgsl`, and the fewest products in a batch
/// that take it: a y[b] of at most `HEADS_TILE` rows and columns, more than 64 of either (so
/// the tiled kernel's 64 x 64 tiles would take two or four for it, or a 128 x 128 one three
/// quarters empty), as a ViT's attention heads of 65 tokens. With fewer products the tiled
/// kernel's several tiles a product spread them over more of the GPU: on the H200 a ViT's QK^T
/// and AV products took 2-7 us less together on the tiled kernel at 16 and 32 heads, 1.3 more
/// to 3.3 less at 48 and 64, and 2-9 more at 80 to 128 (41-46 more at 384).
const HEADS_TILE: usize = 80;
const HEADS_MIN_BATCH: usize = 80;

/// Whether a batch of `batch` products of `m x n` outputs runs one 80 x 80 tile a product
/// (see `HEADS_TILE`).
fn takes_heads(batch: usize, m: usize, n: usize) -> bool {
    batch >= HEADS_MIN_BATCH && m <= HEADS_TILE && n <= HEADS_TILE && (m > 64 || n > 64)
}

thread_local! {
    static HEADS_RECORDED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many products this thread has recorded on the one-tile kernel of small batched
/// products (`shaders/matmul/heads.wgsl`): for tests and benchmarks that need to know which
/// kernel ran.
pub fn heads_products_recorded() -> u64 {
    HEADS_RECORDED.with(|c| c.get())
}

/// The one-tile kernel of a batch of small products (`shaders/matmul/heads.wgsl`): its dtype
/// (f32, or f16 summed in f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HeadsKey {
    dtype: DType,
}

impl KernelKey for HeadsKey {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<MatmulParams>().ty("x", self.dtype);
        let parts = [read_a(false, false), read_b(false, false), include_str!("shaders/matmul/out_rounded.wgsl"), write_y(false, false), HEADS];
        parts.into_iter().fold(w, Wgsl::part).build()
    }

    fn all(repr: &Repr) -> Vec<HeadsKey> {
        SMALL_DTYPES.into_iter().filter(|&d| repr.computes(d)).map(|dtype| HeadsKey { dtype }).collect()
    }
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

/// One matmul kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    dtype: DType,
    v: Variant,
}

fn tile_sizes(dtype: DType) -> &'static [u32] {
    // 64 f64 accumulators per invocation would spill; f64 keeps to the small tile.
    if dtype == DType::F64 {
        &[1]
    } else {
        &[1, 2]
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let Key { dtype, v } = *self;
        let load = |l: Load| match l {
            Load::K => 0,
            Load::Outer => 1,
            Load::Strided => 2,
        };
        // The bindings: vec4 elements where the loader reads vec4s; partial sums stay in the
        // compute type, results are rounded to the dtype.
        let (read_a, read_b) = (read_a(v.a != Load::Strided, v.packed), read_b(v.b != Load::Strided, v.packed));
        let out = if v.partial { include_str!("shaders/matmul/out_partial.wgsl") } else { include_str!("shaders/matmul/out_rounded.wgsl") };
        let write = write_y(v.out4, v.packs_y());
        // Workgroup memory stays within 16 KiB, the least every adapter offers: 64 x 64 f32 tiles
        // can afford a vec4 of padding per row, 128 x 128 f32 and 64 x 64 f64 tiles cannot.
        let pad = v.h == 1 && dtype != DType::F64;
        // Unrolling the inner loop by hand made f32 10-17% faster on an H200 but f16 and bf16 10-17%
        // slower (measured, 4096^3; the driver's register allocation differs).
        let unroll = matches!(dtype, DType::F32 | DType::F64);
        let w =
            Wgsl::new(repr).params::<MatmulParams>().ty("x", dtype).uint("H", v.h).uint("PAD", pad as u32).uint("A_LOAD", load(v.a)).uint("B_LOAD", load(v.b));
        // The loops around each tile kept: without them the f32 products ran 1-5% slower on the
        // H200.
        let w = w.flag("FLAT", false);
        let w = w.flag("OUT4", v.out4).flag("UNROLL", unroll).flag("FETCH_INSIDE", true);
        let w = if v.packed { with_words(w) } else { w };
        let epilogue = if v.bias { BIAS } else { NO_BIAS };
        w.part(read_a).part(read_b).part(out).part(write).part(epilogue).part(TILE).part(LOAD_A).part(MATMUL).part(ENTRY).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let mut out = Vec::new();
        let loads = [Load::K, Load::Outer, Load::Strided];
        for dtype in DType::ALL.into_iter().filter(|&d| repr.computes(d)) {
            for &h in tile_sizes(dtype) {
                for a in loads {
                    for b in loads {
                        for (out4, partial) in [(false, false), (true, false), (false, true), (true, true)] {
                            for packed in [false, true].into_iter().filter(|&p| !p || dtype == DType::BF16) {
                                let biases: &[bool] = if partial || packed { &[false] } else { &[false, true] };
                                for &bias in biases {
                                    out.push(Key { dtype, v: Variant { h, a, b, out4, partial, packed, bias } });
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// `[B, rows, cols]` strides and offset of one operand, with `rows`/`cols` its two matrix dims.
struct Operand {
    sizes: [usize; 3],
    strides: [usize; 3],
    offset: usize,
}

impl Operand {
    fn of(x: &Strided) -> Operand {
        let (s, t) = (x.layout.shape(), x.layout.strides());
        Operand { sizes: [s[0], s[1], s[2]], strides: [t[0], t[1], t[2]], offset: x.layout.offset() }
    }

    /// Whether vec4s along matrix dim `d` (1 or 2) are aligned whole vec4s inside the view: `d`
    /// is contiguous and a multiple of 4 long, and every other stride and the offset are
    /// multiples of 4 (or belong to a dim of size 1, whose stride is never used).
    fn vec4_along(&self, d: usize) -> bool {
        let other_ok = (0..3).filter(|&e| e != d).all(|e| self.sizes[e] == 1 || self.strides[e].is_multiple_of(4));
        self.strides[d] == 1 && self.sizes[d].is_multiple_of(4) && other_ok && self.offset.is_multiple_of(4)
    }

    /// The loader for this operand, whose K dim is `k` (2 for the lhs, 1 for the rhs).
    fn load(&self, k: usize) -> Load {
        if self.vec4_along(k) {
            Load::K
        } else if self.vec4_along(3 - k) {
            Load::Outer
        } else {
            Load::Strided
        }
    }

    /// For the scalar loader: whether to walk the non-K dim (the one with the smaller stride)
    /// so that neighbouring invocations read neighbouring elements.
    fn walk_outer(&self, k: usize) -> bool {
        let outer = 3 - k;
        self.sizes[k] == 1 || (self.sizes[outer] > 1 && self.strides[outer] < self.strides[k])
    }
}

impl WgpuBackend {
    /// `lhs x rhs`; bf16 operands may come packed (both or neither).
    pub(crate) fn matmul_op(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.matmul_bias_op(lhs, rhs, None)
    }

    /// `ops::MatmulBias`: `x [M, K]` times `weight [N, K]` transposed plus `bias [N]`, or
    /// `None` for packed bf16 and sizes past one binding (the composite runs).
    pub(crate) fn fused_matmul_bias(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [x, w, b] = inputs else { return None };
        let (xs, ws, dtype) = (x.layout.shape(), w.layout.shape(), x.dtype);
        let shaped = xs.len() == 2 && ws.len() == 2 && xs[1] == ws[1] && b.layout.shape() == [ws[0]];
        if !shaped || !self.repr.computes(dtype) || inputs.iter().any(|v| v.dtype != dtype || packed_view(v)) {
            return None;
        }
        let (m, k, n) = (xs[0], xs[1], ws[0]);
        let (xt, wt) = (x.layout.strides(), w.layout.strides());
        let lhs = Layout::new(vec![1, m, k], vec![m * k, xt[0], xt[1]], x.layout.offset());
        let rhs = Layout::new(vec![1, k, n], vec![k * n, wt[1], wt[0]], w.layout.offset());
        let (lhs, rhs) = (Strided { storage: x.storage, layout: &lhs, dtype }, Strided { storage: w.storage, layout: &rhs, dtype });
        if self.oversized(&[lhs, rhs, *b], m * n, dtype).is_some() {
            return None;
        }
        Some(self.matmul_bias_op(lhs, rhs, Some(*b)).map(|y| vec![y]))
    }

    /// [`WgpuBackend::matmul_op`] plus `bias`, one value per column of y (`[N]`, one batch;
    /// `ops::MatmulBias`): added as the tiled kernel (or the one-dispatch kernel of a small
    /// product, `takes_small`) stores its finished sums, or by a
    /// broadcast add after where the tensor cores run the product, K is split or the operands
    /// are packed.
    pub(crate) fn matmul_bias_op(&self, lhs: Strided, rhs: Strided, bias: Option<Strided>) -> Result<Storage> {
        self.matmul_cut_op(lhs, rhs, bias, None)
    }

    /// [`WgpuBackend::matmul_bias_op`], with the tiled kernel's cut given (`(tile, splits)`:
    /// 64 or 128, K in that many ranges) where a caller knows its products better than the
    /// rule (the Winograd convolutions' batches, `conv/winograd.rs`); the autotune, where it is
    /// on, starts from it. Products that run elsewhere (tensor cores, packed bf16, the small
    /// kernel) ignore it.
    pub(crate) fn matmul_cut_op(&self, lhs: Strided, rhs: Strided, bias: Option<Strided>, cut: Option<(usize, usize)>) -> Result<Storage> {
        let dtype = lhs.dtype;
        let packed = packed_view(&lhs);
        debug_assert_eq!(packed, packed_view(&rhs), "matmul operands packed alike");
        let (a, b) = (Operand::of(&lhs), Operand::of(&rhs));
        let [batch, m, k] = a.sizes;
        let n = b.sizes[2];
        // f16 on tensor cores where the device has them (the one place this is decided).
        let gpu = self.gpu()?;
        let coop = self.repr.computes(dtype) && matmul_coop::chosen(gpu, dtype);
        let (a_load, b_load) = (a.load(2), b.load(1));
        if !coop && !packed && copies_rhs(dtype, [batch, m, k, n], (a_load, b_load), cut) {
            // A weight broadcast over the batch (stride 0) is copied once, and read so.
            let [batch, k, n] = b.sizes;
            let once = batch > 1 && b.strides[0] == 0;
            let from = if once { rhs.layout.narrow(0, 0, 1)? } else { rhs.layout.clone() };
            let copied = self.copy_view(Strided { storage: rhs.storage, layout: &from, dtype })?;
            let layout = if once { Layout::new(vec![batch, k, n], vec![0, n, 1], 0) } else { crate::kernels::dense(&[batch, k, n]) };
            return self.matmul_cut_op(lhs, Strided { storage: copied.as_ref(), layout: &layout, dtype }, bias, cut);
        }
        let coop_variant = matmul_coop::Variant::for_product(gpu.coop_variant, [m, k, n]);
        let cut = cut.filter(|_| !coop && !packed && dtype != DType::F64).map(|(tile, splits)| (if tile == 128 { 128 } else { 64 }, splits.max(1)));
        let (tm, tn) = if coop {
            coop_variant.tile()
        } else if let Some((tile, _)) = cut {
            (tile, tile)
        } else if dtype != DType::F64 && m.div_ceil(128) * n.div_ceil(128) * batch >= BIG_TILES {
            (128, 128)
        } else {
            (64, 64)
        };
        let tiles = (m.div_ceil(tm) * n.div_ceil(tn) * batch * if coop { coop_variant.weight() } else { 1 }).max(1);
        // K in ranges of whole 16-deep slices: `(splits, range)` for a split in `splits`.
        let cut_k = |splits: usize| {
            let ks = k.div_ceil(splits).next_multiple_of(16).max(16);
            (k.div_ceil(ks).max(1), ks)
        };
        let extents_fit = [&lhs, &rhs].iter().all(|x| u32::try_from(x.layout.max_extent()).is_ok());
        // The meta block of a cut in `splits` ranges (as `cut_k` gives them), or `None` where a
        // size passes 32 bits.
        let meta = |(splits, ks): (usize, usize)| -> Option<MatmulParams> {
            let fits = extents_fit && u32::try_from(splits * batch * m * n).is_ok();
            let u = |v: usize| u32::try_from(v).ok();
            let block = MatmulParams {
                batch: u(batch)?,
                m: u(m)?,
                k: u(k)?,
                n: u(n)?,
                a_stride_b: u(a.strides[0])?,
                a_stride_m: u(a.strides[1])?,
                a_stride_k: u(a.strides[2])?,
                a_offset: u(a.offset)?,
                b_stride_b: u(b.strides[0])?,
                b_stride_k: u(b.strides[1])?,
                b_stride_n: u(b.strides[2])?,
                b_offset: u(b.offset)?,
                a_walk_m: a.walk_outer(2) as u32,
                b_walk_n: b.walk_outer(1) as u32,
                splits: u(splits)?,
                split_k: u(ks)?,
                bias_offset: 0,
            };
            fits.then_some(block)
        };
        // A small product whose K the tiled kernel would split takes the one-dispatch kernel,
        // in f16 too where the tensor cores would run it (as latency-bound there: the LSTM's
        // f16 products took 22.8-23.6 us a call on them).
        let tiled_splits = k_splits((m.div_ceil(64) * n.div_ceil(64) * batch).max(1), k, batch * m * n);
        if SMALL_DTYPES.contains(&dtype) && !packed && self.repr.computes(dtype) && takes_small(batch * m * n, k, a_load, b_load, tiled_splits) {
            if let Some(meta) = meta(cut_k(1)) {
                return self.small_product(&lhs, &rhs, bias.as_ref(), [batch, m, n], b_load, meta);
            }
        }
        if SMALL_DTYPES.contains(&dtype) && !packed && !coop && cut.is_none() && bias.is_none() && self.repr.computes(dtype) && takes_heads(batch, m, n) {
            if let Some(meta) = meta(cut_k(1)) {
                return self.heads_product(&lhs, &rhs, [batch, m, n], meta);
            }
        }
        let rule_k = cut_k(cut.map_or_else(|| k_splits(tiles, k, batch * m * n), |(_, splits)| splits.min(k.div_ceil(16))));
        let (true, Some(rule_meta)) = (self.repr.computes(dtype), meta(rule_k)) else {
            let why = if self.repr.computes(dtype) { WIDE } else { Why::Unsupported };
            return self.fallback1(format!("matmul ({dtype})"), why, &[lhs, rhs], dtype, |cpu, v| cpu.matmul(v[0], v[1]));
        };
        let rule = (tm, rule_k.0);
        // The bias goes in the kernel's epilogue where it stores finished sums of its own.
        let in_kernel = |splits: usize| bias.is_some() && !coop && !packed && splits == 1;
        let variant = |tm: usize, splits: usize| Variant {
            h: tm as u32 / 64,
            a: a_load,
            b: b_load,
            out4: n % 4 == 0,
            partial: splits > 1,
            packed,
            bias: in_kernel(splits),
        };
        let out = if variant(rule.0, rule.1).packs_y() { self.packed_output(batch * m * n)? } else { self.output(dtype, batch * m * n)? };
        // Records the product cut in `tm`-row tiles (and as many columns; the tensor-core
        // variant's own where `coop`) with K in `splits` ranges, whose meta block is `meta`;
        // `false`: the tensor-core kernel failed to build (f16 has left the tensor cores for good).
        let run = |tm: usize, splits: usize, meta: &MatmulParams| -> Result<bool> {
            let tn = if coop { tn } else { tm };
            let groups = |count: usize| count.clamp(1, 65_535) as u32;
            let grid = (groups(n.div_ceil(tn)), groups(m.div_ceil(tm)), groups(batch * splits));
            let kernel = if coop {
                let key = matmul_coop::Key { variant: coop_variant, a: a_load, b: b_load, partial: splits > 1 };
                match matmul_coop::kernel(gpu, key) {
                    Some(k) => k,
                    None => return Ok(false),
                }
            } else {
                gpu.kernel(Key { dtype, v: variant(tm, splits) })?
            };
            let (x, w) = (gpu_storage(&lhs).buffer(), gpu_storage(&rhs).buffer());
            if let (Some(b), true) = (&bias, in_kernel(splits)) {
                let bias_offset = u32::try_from(b.layout.offset()).map_err(|_| gpu.err("matmul", "a bias offset past 32 bits"))?;
                gpu.dispatch(&kernel, &words(&MatmulParams { bias_offset, ..*meta }), &[x, w, out.buffer(), gpu_storage(b).buffer()], grid)?;
            } else if splits == 1 {
                gpu.dispatch(&kernel, &words(meta), &[x, w, out.buffer()], grid)?;
            } else {
                let partials = gpu.alloc((splits * batch * m * n * if dtype == DType::F64 { 8 } else { 4 }) as u64)?;
                gpu.dispatch(&kernel, &words(meta), &[x, w, partials.buffer()], grid)?;
                self.sum_partials(dtype, splits, batch * m * n, partials.buffer(), out.buffer())?;
            }
            Ok(true)
        };
        // The autotune (`tune.rs`), where it is on, times the tiled kernel's cuts where the
        // output is the same in each (not packed bf16).
        let (tm, splits) = if coop || packed {
            rule
        } else {
            let candidates = || {
                let tiles: &[usize] = if dtype == DType::F64 { &[64] } else { &[64, 128] };
                // f64 partial sums take twice the bytes: counted as twice the outputs.
                let total = batch * m * n * if dtype == DType::F64 { 2 } else { 1 };
                let groups = |tile: usize| m.div_ceil(tile) * n.div_ceil(tile) * batch;
                let fits = |tile, s| meta(cut_k(s)).is_some() && crate::tune::split_fits(tile, s, groups, total, gpu.max_binding());
                crate::tune::candidates(rule, tiles, k, fits)
            };
            let shape = Shape::Matmul { dtype, batch, m, k, n, a: a_load, b: b_load };
            let time = |(tm, s): (usize, usize)| -> Result<()> {
                let meta = meta(cut_k(s)).ok_or_else(|| gpu.err("matmul", "a candidate cut past 32-bit sizes"))?;
                run(tm, s, &meta).map(drop)
            };
            gpu.tuned_cut(shape, rule, candidates, time)?
        };
        let meta = if splits == rule.1 { Some(rule_meta) } else { meta(cut_k(splits)) };
        let meta = meta.ok_or_else(|| gpu.err("matmul", "a tuned cut past 32-bit sizes"))?;
        if !run(tm, splits, &meta)? {
            return self.matmul_bias_op(lhs, rhs, bias);
        }
        let out = Arc::new(out) as Storage;
        match bias {
            Some(b) if !in_kernel(splits) => self.add_bias(out, &[batch, m, n], &b, vec![0, 0, 1]),
            _ => Ok(out),
        }
    }
}

impl WgpuBackend {
    /// The one-dispatch kernel's product (see `takes_small`) of `[batch, m, n]` outputs, b
    /// loaded as `b_load`, with the tiled kernel's meta block (`meta`, whose split it ignores)
    /// and the bias, if any, added as the sums are stored.
    fn small_product(
        &self,
        lhs: &Strided,
        rhs: &Strided,
        bias: Option<&Strided>,
        [batch, m, n]: [usize; 3],
        b_load: Load,
        mut meta: MatmulParams,
    ) -> Result<Storage> {
        let gpu = self.gpu()?;
        let dtype = lhs.dtype;
        let out = self.output(dtype, batch * m * n)?;
        let blocks = |(bm, bn): (u32, u32)| batch * m.div_ceil(bm as usize) * n.div_ceil(bn as usize);
        let block = if blocks(SMALL_BLOCKS[0]) >= SMALL_BLOCKS_MIN { SMALL_BLOCKS[0] } else { SMALL_BLOCKS[1] };
        let kernel = gpu.kernel(SmallKey { dtype, b: b_load, bias: bias.is_some(), block })?;
        let groups = |count: usize| count.clamp(1, 65_535) as u32;
        let grid = (groups(n.div_ceil(block.1 as usize)), groups(m.div_ceil(block.0 as usize)), groups(batch));
        let mut buffers = vec![gpu_storage(lhs).buffer(), gpu_storage(rhs).buffer(), out.buffer()];
        if let Some(b) = bias {
            meta.bias_offset = u32::try_from(b.layout.offset()).map_err(|_| gpu.err("matmul", "a bias offset past 32 bits"))?;
            buffers.push(gpu_storage(b).buffer());
        }
        gpu.dispatch(&kernel, &words(&meta), &buffers, grid)?;
        Ok(Arc::new(out) as Storage)
    }

    /// A batch of small products on `shaders/matmul/heads.wgsl`, one 80 x 80 tile a product
    /// (`takes_heads`), with the tiled kernel's meta block (`meta`, K in one range).
    fn heads_product(&self, lhs: &Strided, rhs: &Strided, [batch, m, n]: [usize; 3], meta: MatmulParams) -> Result<Storage> {
        let gpu = self.gpu()?;
        let dtype = lhs.dtype;
        let out = self.output(dtype, batch * m * n)?;
        let kernel = gpu.kernel(HeadsKey { dtype })?;
        let groups = |count: usize| count.clamp(1, 65_535) as u32;
        let grid = (groups(n.div_ceil(HEADS_TILE)), groups(m.div_ceil(HEADS_TILE)), groups(batch));
        gpu.dispatch(&kernel, &words(&meta), &[gpu_storage(lhs).buffer(), gpu_storage(rhs).buffer(), out.buffer()], grid)?;
        HEADS_RECORDED.with(|c| c.set(c.get() + 1));
        Ok(Arc::new(out) as Storage)
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
    }
}
