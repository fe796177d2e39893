//! Batched matrix multiplication: a tiled kernel with register blocking (`shaders/matmul.wgsl`),
//! reading each operand through its strides, or in vec4s where its inner dimension allows.
//!
//! The loaders are picked per operand at run time: vec4s along K for a row-major lhs or a
//! transposed rhs (a linear layer's weight), vec4s along M / N for the other orientation, and
//! scalar loads through any strides (broadcast, narrowed, odd sizes) otherwise. f16 and bf16
//! accumulate in f32; f64 without SHADER_F64 runs on the CPU. f16 runs on cooperative matrices
//! (tensor cores, `matmul/coop.rs`) where the device has them, on the same operands and splits,
//! and so does packed bf16, scaled into f16.
//! A small f32 or f16 product whose K the tiled kernel would split over workgroups runs instead
//! as one dispatch that splits K inside a workgroup (`shaders/matmul/small.wgsl`), and a batch
//! of products each a little larger than a 64 x 64 tile (a ViT's 65-token attention heads) one
//! 80 x 80 tile a product (`shaders/matmul/heads.wgsl`). Which of these runs, on which tiles
//! and splits of K, is `plan/matmul.rs`.

use std::sync::Arc;

use liandan_tensor::{DType, Layout, Result, Storage, Strided};

pub(crate) mod coop;

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::bind::PerOperand;
use crate::kernels::{KernelKey, Wgsl};
use crate::launch::WIDE;
use crate::packed::{packed_view, with_words};
use crate::params::words;
use crate::plan::{self, packs_y, Load, MatmulPlan, Product, Tiled, HEADS_TILE, SMALL_BLOCKS, SMALL_DTYPES};
use crate::repr::Repr;
use crate::tune::Shape;

const MATMUL: &str = include_str!("../shaders/matmul.wgsl");
const BIAS: &str = include_str!("../shaders/matmul/bias.wgsl");
const BIAS_PACKED: &str = include_str!("../shaders/matmul/bias_packed.wgsl");
const GELU_GRAD: &str = include_str!("../shaders/matmul/gelu_grad.wgsl");
const BIAS_GELU: &str = include_str!("../shaders/matmul/bias_gelu.wgsl");
const ERF: &str = include_str!("../shaders/erf.wgsl");
/// The epilogue of a product without a bias, which the convolutions share.
pub(crate) const NO_BIAS: &str = include_str!("../shaders/matmul/no_bias.wgsl");
pub(crate) const ENTRY: &str = include_str!("../shaders/matmul/entry.wgsl");
/// The tiled product and the strided lhs loaders, which the convolutions share.
pub(crate) const TILE: &str = include_str!("../shaders/matmul/tile.wgsl");
pub(crate) const LOAD_A: &str = include_str!("../shaders/matmul/load_a.wgsl");
const SMALL: &str = include_str!("../shaders/matmul/small.wgsl");
/// The small products' sums (shared with the LSTM step's kernel).
pub(crate) const SMALL_SUMS: &str = include_str!("../shaders/matmul/small_sums.wgsl");
const HEADS: &str = include_str!("../shaders/matmul/heads.wgsl");

crate::shader_params! {
    /// A product's fields (`shaders/matmul.wgsl`), which the matmul's and the convolutions'
    /// blocks open with: y[b] = a[b] x b[b] for `batch` products of a `[m, k]` by b `[k, n]`,
    /// each operand's strides and offset; `a_walk_m` / `b_walk_n`: whether the scalar loaders
    /// walk along M / N rather than K; K cut into `splits` ranges of `split_k`.
    pub(crate) struct ProductParams {
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
    }
}

crate::shader_params! {
    /// A product's block: its fields, and the bias's offset where the kernel adds one.
    pub(crate) struct MatmulParams {
        pub product: ProductParams,
        pub bias_offset: u32,
    }
}

/// One compiled variant: `h` = 1 gives 64 x 64 tiles, 2 gives 128 x 128; `partial`: the
/// kernel writes unrounded partial sums over a split of K, for `reduce` to add up; `packed`:
/// a and b are bf16 held two to a word (`packed.rs`), widened as they are read, and y is
/// written packed too where it is written whole in vec4s ([`Variant::packs_y`]); `bias`: a
/// `epilogue`: what becomes of the finished sums as they are stored ([`Epilogue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Variant {
    h: u32,
    a: Load,
    b: Load,
    out4: bool,
    partial: bool,
    packed: bool,
    epilogue: Epilogue,
}

/// What the tiled kernel does to its finished sums as it stores them (partial sums: nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Epilogue {
    None,
    /// A linear layer's bias (packed where a and b are) added to each column.
    Bias,
    /// Each f32 sum multiplied by GELU's gradient at the matching element of a matrix of y's
    /// shape (`ops::MatmulGeluBackward`).
    GeluGrad,
    /// The bias added, and GELU of each f32 result written to a second matrix
    /// (`ops::LinearGelu`).
    BiasGelu,
}

impl Variant {
    fn packs_y(&self) -> bool {
        packs_y(self.packed, self.out4, self.partial)
    }
}

/// The binding and reads of the a operand (`fetch_a`, `fetch_a4`): in vec4s or scalars, as
/// stored or packed bf16. The convolutions share them.
pub(crate) fn read_a(vec4: bool, packed: bool) -> &'static str {
    match (vec4, packed) {
        (false, false) => include_str!("../shaders/matmul/read_a.wgsl"),
        (true, false) => include_str!("../shaders/matmul/read_a4.wgsl"),
        (false, true) => include_str!("../shaders/matmul/read_a_packed.wgsl"),
        (true, true) => include_str!("../shaders/matmul/read_a4_packed.wgsl"),
    }
}

/// The binding and stores of y (`store_y4`, `store_y`): in vec4s or scalars, and where
/// `packed` (with vec4s only, whose words are one invocation's alone) as packed bf16.
pub(crate) fn write_y(vec4: bool, packed: bool) -> &'static str {
    match (vec4, packed) {
        (false, _) => include_str!("../shaders/matmul/write.wgsl"),
        (true, false) => include_str!("../shaders/matmul/write4.wgsl"),
        (true, true) => include_str!("../shaders/matmul/write4_packed.wgsl"),
    }
}

/// [`read_a`] for the b operand.
pub(crate) fn read_b(vec4: bool, packed: bool) -> &'static str {
    match (vec4, packed) {
        (false, false) => include_str!("../shaders/matmul/read_b.wgsl"),
        (true, false) => include_str!("../shaders/matmul/read_b4.wgsl"),
        (false, true) => include_str!("../shaders/matmul/read_b_packed.wgsl"),
        (true, true) => include_str!("../shaders/matmul/read_b4_packed.wgsl"),
    }
}

/// The one-dispatch kernel of a small product: its dtype (f32, or f16 summed in f32), or
/// `packed` bf16 operands and bias, widened as they are read (y is written unpacked: bf16 in
/// f32 words); b's loader (vec4s along K or N), whether a linear layer's bias is added as y is
/// stored, and the block of y a workgroup computes. `wide`: the f32 sums written as they are
/// (`ops::MatmulWide`; no bias).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SmallKey {
    dtype: DType,
    packed: bool,
    b: Load,
    bias: bool,
    block: (u32, u32),
    wide: bool,
}

impl KernelKey for SmallKey {
    fn source(&self, repr: &Repr) -> String {
        let b_load = if self.b == Load::K { 0 } else { 1 };
        let w = Wgsl::new(repr).params::<MatmulParams>().ty("x", self.dtype).uint("B_LOAD", b_load).uint("BM", self.block.0).uint("BN", self.block.1);
        let w = if self.packed { with_words(w) } else { w };
        let epilogue = match (self.bias, self.packed) {
            (false, _) => NO_BIAS,
            (true, false) => BIAS,
            (true, true) => BIAS_PACKED,
        };
        let (a, b) = (read_a(true, self.packed), read_b(true, self.packed));
        let out = if self.wide { include_str!("../shaders/matmul/out_partial.wgsl") } else { include_str!("../shaders/matmul/out_rounded.wgsl") };
        let parts = [a, b, out, write_y(false, false), epilogue, SMALL_SUMS, SMALL];
        parts.into_iter().fold(w, Wgsl::part).build()
    }

    fn all(repr: &Repr) -> Vec<SmallKey> {
        let mut kinds: Vec<(DType, bool)> = SMALL_DTYPES.into_iter().filter(|&d| repr.computes(d)).map(|d| (d, false)).collect();
        kinds.push((DType::BF16, true));
        let mut out = Vec::new();
        for (dtype, packed) in kinds {
            for b in [Load::K, Load::Outer] {
                for bias in [false, true] {
                    out.extend(SMALL_BLOCKS.map(|block| SmallKey { dtype, packed, b, bias, block, wide: false }));
                }
                if dtype == DType::F16 || packed {
                    out.extend(SMALL_BLOCKS.map(|block| SmallKey { dtype, packed, b, bias: false, block, wide: true }));
                }
            }
        }
        out
    }
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
/// (f32, or f16 summed in f32), or `packed` bf16 operands, widened as they are read (y is
/// written unpacked: bf16 in f32 words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HeadsKey {
    dtype: DType,
    packed: bool,
}

impl KernelKey for HeadsKey {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<MatmulParams>().ty("x", self.dtype);
        let w = if self.packed { with_words(w) } else { w };
        let parts = [read_a(false, self.packed), read_b(false, self.packed), include_str!("../shaders/matmul/out_rounded.wgsl"), write_y(false, false), HEADS];
        parts.into_iter().fold(w, Wgsl::part).build()
    }

    fn all(repr: &Repr) -> Vec<HeadsKey> {
        let mut all: Vec<HeadsKey> = SMALL_DTYPES.into_iter().filter(|&d| repr.computes(d)).map(|dtype| HeadsKey { dtype, packed: false }).collect();
        all.push(HeadsKey { dtype: DType::BF16, packed: true });
        all
    }
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
        let out = if v.partial { include_str!("../shaders/matmul/out_partial.wgsl") } else { include_str!("../shaders/matmul/out_rounded.wgsl") };
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
        let epilogue = match (v.epilogue, v.packed) {
            (Epilogue::None, _) => NO_BIAS,
            (Epilogue::Bias, false) => BIAS,
            (Epilogue::Bias, true) => BIAS_PACKED,
            (Epilogue::GeluGrad, _) => GELU_GRAD,
            (Epilogue::BiasGelu, _) => BIAS_GELU,
        };
        let w = if matches!(v.epilogue, Epilogue::GeluGrad | Epilogue::BiasGelu) { w.part(ERF) } else { w };
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
                                // GELU's: f32 finished sums only.
                                let epilogues: &[Epilogue] = match (partial, dtype) {
                                    (true, _) => &[Epilogue::None],
                                    (false, DType::F32) => &[Epilogue::None, Epilogue::Bias, Epilogue::GeluGrad, Epilogue::BiasGelu],
                                    (false, _) => &[Epilogue::None, Epilogue::Bias],
                                };
                                for &epilogue in epilogues {
                                    out.push(Key { dtype, v: Variant { h, a, b, out4, partial, packed, epilogue } });
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

/// A matrix of `v`'s elements, `[rows, cols]` with these strides from its offset, as the one
/// product of a batch (the `[B, rows, cols]` view the products take).
fn batch_of_one(v: &Strided, [rows, cols]: [usize; 2], strides: [usize; 2]) -> Layout {
    Layout::new(vec![1, rows, cols], vec![rows * cols, strides[0], strides[1]], v.layout.offset())
}

impl WgpuBackend {
    /// `lhs x rhs`; bf16 operands may come packed (both or neither).
    pub(crate) fn matmul_op(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.matmul_bias_op(lhs, rhs, None)
    }

    /// `ops::MatmulBias`: `x [M, K]` times `weight [N, K]` transposed plus `bias [N]`, or
    /// `None` for a mixture of packed and unpacked bf16 and sizes past one binding (the
    /// composite runs).
    pub(crate) fn fused_matmul_bias(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [x, w, b] = inputs else { return None };
        let (xs, ws, dtype) = (x.layout.shape(), w.layout.shape(), x.dtype);
        // The kernels read the bias at its offset, a value a column.
        let shaped = xs.len() == 2 && ws.len() == 2 && xs[1] == ws[1] && b.layout.shape() == [ws[0]] && b.layout.is_contiguous();
        // Packed bf16 operands all packed (`fused.rs` widens a mixture).
        if !shaped || !self.repr.computes(dtype) || inputs.iter().any(|v| v.dtype != dtype || packed_view(v) != packed_view(x)) {
            return None;
        }
        let (m, k, n) = (xs[0], xs[1], ws[0]);
        let (xt, wt) = (x.layout.strides(), w.layout.strides());
        let (lhs, rhs) = (batch_of_one(x, [m, k], [xt[0], xt[1]]), batch_of_one(w, [k, n], [wt[1], wt[0]]));
        let (lhs, rhs) = (Strided { storage: x.storage, layout: &lhs, dtype }, Strided { storage: w.storage, layout: &rhs, dtype });
        if self.oversized(&[lhs, rhs, *b], m * n, dtype).is_some() {
            return None;
        }
        Some(self.matmul_bias_op(lhs, rhs, Some(*b)).map(|y| vec![y]))
    }

    /// [`WgpuBackend::matmul_op`] plus `bias`, one value per column of y (`[N]`, one batch;
    /// `ops::MatmulBias`): added as the tiled kernel (or the one-dispatch kernel of a small
    /// product, `plan::MatmulPlan::Small`, or the tensor cores' where they write packed bf16 or
    /// f16 of an even N) stores its finished sums, or as a split K's sums are added up, or by a
    /// broadcast add after (f64 where K is split, the tensor cores' f16 of an odd N, their bf16
    /// where y is not written packed).
    pub(crate) fn matmul_bias_op(&self, lhs: Strided, rhs: Strided, bias: Option<Strided>) -> Result<Storage> {
        self.matmul_cut_op(lhs, rhs, bias, None)
    }

    /// [`WgpuBackend::matmul_bias_op`], with the tiled kernel's cut given (`(tile, splits)`:
    /// 64 or 128, K in that many ranges) where a caller knows its products better than the
    /// rule (the Winograd convolutions' batches, `conv/winograd.rs`); the autotune, where it is
    /// on, starts from it. Products that run elsewhere (tensor cores, packed bf16, the small
    /// kernel) ignore it. The route is `plan::matmul`'s; this runs it.
    pub(crate) fn matmul_cut_op(&self, lhs: Strided, rhs: Strided, bias: Option<Strided>, cut: Option<(usize, usize)>) -> Result<Storage> {
        let product = self.product_op(lhs, rhs, bias, cut, Extra::None)?;
        Ok(product.expect("a product rounded to its dtype runs on every route").remove(0))
    }

    /// `ops::MatmulWide`: f16 or packed bf16 `a [M, K]` times `b [K, N]` (any strides), the
    /// sums written in f32; `None` where the product would not run on the tiled, tensor-core or
    /// one-dispatch kernels (the composite runs).
    pub(crate) fn fused_matmul_wide(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [a, b] = inputs else { return None };
        let (xs, ws, dtype) = (a.layout.shape(), b.layout.shape(), a.dtype);
        // f16, or bf16 packed (both operands), whose kernels widen it as they read it.
        let low = match dtype {
            DType::F16 => self.repr.computes(dtype),
            DType::BF16 => packed_view(a) && packed_view(b),
            _ => false,
        };
        if xs.len() != 2 || ws.len() != 2 || xs[1] != ws[0] || b.dtype != dtype || !low {
            return None;
        }
        let (m, k, n) = (xs[0], xs[1], ws[1]);
        let (at, bt) = (a.layout.strides(), b.layout.strides());
        let (lhs, rhs) = (batch_of_one(a, [m, k], [at[0], at[1]]), batch_of_one(b, [k, n], [bt[0], bt[1]]));
        let (lhs, rhs) = (Strided { storage: a.storage, layout: &lhs, dtype }, Strided { storage: b.storage, layout: &rhs, dtype });
        if self.oversized(&[lhs, rhs], m * n, DType::F32).is_some() {
            return None;
        }
        self.product_op(lhs, rhs, None, None, Extra::Wide).transpose()
    }

    /// `ops::LinearGrads`, wide: f16 `g [M, N]` and `x [M, K]` (any strides) give `g^T x` and
    /// `g`'s column sums in f32, the sums from the vec4s of `g^T` the tensor cores' product
    /// fetches along its rows; `None` elsewhere (the engine takes the product and the sum
    /// apart). The tiled f32 kernel, summing the staged rows in its inner loop, ran vit's f32
    /// step slower than the product and the column sums apart.
    pub(crate) fn fused_linear_grads(&self, wide: bool, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [g, x] = inputs else { return None };
        let (gs, xs) = (g.layout.shape(), x.layout.shape());
        if !wide || gs.len() != 2 || xs.len() != 2 || gs[0] != xs[0] || g.dtype != DType::F16 || x.dtype != DType::F16 || !self.repr.computes(DType::F16) {
            return None;
        }
        let (rows, n, k) = (gs[0], gs[1], xs[1]);
        let (gt, xt) = (g.layout.strides(), x.layout.strides());
        let (lhs, rhs) = (batch_of_one(g, [n, rows], [gt[1], gt[0]]), batch_of_one(x, [rows, k], [xt[0], xt[1]]));
        let (lhs, rhs) = (Strided { storage: g.storage, layout: &lhs, dtype: g.dtype }, Strided { storage: x.storage, layout: &rhs, dtype: g.dtype });
        if self.oversized(&[lhs, rhs], n * k, DType::F32).is_some() {
            return None;
        }
        self.product_op(lhs, rhs, None, None, Extra::WideRows).transpose()
    }

    /// `ops::MatmulGeluBackward`: f32 `dy [M, N]` times `weight [N, K]` (any strides), each sum
    /// multiplied by GELU's gradient at `h [M, K]` (contiguous) as the tiled kernel stores it;
    /// `None` where the product would not run unsplit on the tiled kernel, or without
    /// `Knobs::gelu_epilogues` (the composite runs: the product, then GELU's gradient).
    pub(crate) fn fused_matmul_gelu_backward(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [dy, w, h] = inputs else { return None };
        if !self.gpu().ok()?.options().testing.gelu_epilogues {
            return None;
        }
        let (ds, ws) = (dy.layout.shape(), w.layout.shape());
        let shaped = ds.len() == 2 && ws.len() == 2 && ds[1] == ws[0] && h.layout.shape() == [ds[0], ws[1]] && h.layout.is_contiguous();
        if !shaped || inputs.iter().any(|v| v.dtype != DType::F32) || !self.repr.computes(DType::F32) {
            return None;
        }
        let (m, n, k) = (ds[0], ds[1], ws[1]);
        let (dt, wt) = (dy.layout.strides(), w.layout.strides());
        let (lhs, rhs) = (batch_of_one(dy, [m, n], [dt[0], dt[1]]), batch_of_one(w, [n, k], [wt[0], wt[1]]));
        let (lhs, rhs) = (Strided { storage: dy.storage, layout: &lhs, dtype: DType::F32 }, Strided { storage: w.storage, layout: &rhs, dtype: DType::F32 });
        if self.oversized(&[lhs, rhs, *h], m * k, DType::F32).is_some() {
            return None;
        }
        self.product_op(lhs, rhs, None, None, Extra::GeluGrad(*h)).transpose()
    }

    /// `ops::LinearGelu`: f32 `x [M, K]` times `weight [N, K]` transposed plus `bias [N]`, and
    /// GELU of that, both written by the tiled kernel as it stores its sums; `None` where the
    /// product would not run unsplit on the tiled kernel, or without `Knobs::gelu_epilogues`
    /// (the composite runs).
    pub(crate) fn fused_linear_gelu(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [x, w, b] = inputs else { return None };
        if !self.gpu().ok()?.options().testing.gelu_epilogues {
            return None;
        }
        let (xs, ws) = (x.layout.shape(), w.layout.shape());
        let shaped = xs.len() == 2 && ws.len() == 2 && xs[1] == ws[1] && b.layout.shape() == [ws[0]] && b.layout.is_contiguous();
        if !shaped || inputs.iter().any(|v| v.dtype != DType::F32) || !self.repr.computes(DType::F32) {
            return None;
        }
        let (m, k, n) = (xs[0], xs[1], ws[0]);
        let (xt, wt) = (x.layout.strides(), w.layout.strides());
        let (lhs, rhs) = (batch_of_one(x, [m, k], [xt[0], xt[1]]), batch_of_one(w, [k, n], [wt[1], wt[0]]));
        let (lhs, rhs) = (Strided { storage: x.storage, layout: &lhs, dtype: DType::F32 }, Strided { storage: w.storage, layout: &rhs, dtype: DType::F32 });
        if self.oversized(&[lhs, rhs, *b], m * n, DType::F32).is_some() {
            return None;
        }
        self.product_op(lhs, rhs, Some(*b), None, Extra::Gelu).transpose()
    }

    /// [`WgpuBackend::matmul_cut_op`], its result first; with [`Extra::Wide`],
    /// [`Extra::WideRows`] or [`Extra::GeluGrad`], `None` where the route is not one that
    /// writes what they ask.
    fn product_op(&self, lhs: Strided, rhs: Strided, bias: Option<Strided>, cut: Option<(usize, usize)>, extra: Extra) -> Result<Option<Vec<Storage>>> {
        let (wide, rows) = (matches!(extra, Extra::Wide | Extra::WideRows), matches!(extra, Extra::WideRows));
        let gelu = match extra {
            Extra::GeluGrad(h) => Some(h),
            _ => None,
        };
        // Epilogues only the tiled kernel has, on finished f32 sums.
        let own_epilogue = gelu.is_some() || matches!(extra, Extra::Gelu);
        let dtype = lhs.dtype;
        let packed = packed_view(&lhs);
        debug_assert_eq!(packed, packed_view(&rhs), "matmul operands packed alike");
        let (a, b) = (Operand::of(&lhs), Operand::of(&rhs));
        let [batch, m, k] = a.sizes;
        let n = b.sizes[2];
        let gpu = self.gpu()?;
        let (caps, options) = (gpu.caps(), gpu.options().plan());
        let (a_load, b_load) = (a.load(2), b.load(1));
        let u = |v: usize| u32::try_from(v).is_ok();
        let addressable =
            [&lhs, &rhs].iter().all(|x| u(x.layout.max_extent())) && [batch, m, k, n, a.offset, b.offset].into_iter().chain(a.strides).chain(b.strides).all(u);
        let call = Product { dtype, batch, m, k, n, a: a_load, b: b_load, bias: bias.is_some(), packed, cut, addressable };
        // The meta block of K cut as `cut_k` gives it (`Product::meta_fits` says it fits).
        let meta = |(splits, ks): (usize, usize)| -> Option<MatmulParams> {
            let u = |v: usize| u32::try_from(v).ok();
            let product = ProductParams {
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
            };
            call.meta_fits((splits, ks)).then_some(MatmulParams { product, bias_offset: 0 })
        };
        let no_meta = || gpu.err("matmul", "a cut past 32-bit sizes");
        let tiled = match plan::matmul(&call, &caps, &options, None) {
            // The row sums: one f16 product on the tensor cores, a read along M.
            MatmulPlan::Tiled(t) if rows && (packed || batch != 1 || t.coop.is_none() || a_load != Load::Outer) => return Ok(None),
            MatmulPlan::Tiled(t) => t,
            MatmulPlan::Small { block } if wide && !rows => {
                let meta = meta(plan::cut_k(k, 1)).ok_or_else(no_meta)?;
                return self.small_product(&lhs, &rhs, None, [batch, m, n], (b_load, block), meta, true).map(|y| Some(vec![y]));
            }
            _ if wide || rows || own_epilogue => return Ok(None),
            MatmulPlan::CopyRhs => {
                // A weight broadcast over the batch (stride 0) is copied once, and read so.
                let [batch, k, n] = b.sizes;
                let once = batch > 1 && b.strides[0] == 0;
                let from = if once { rhs.layout.narrow(0, 0, 1)? } else { rhs.layout.clone() };
                let copied = self.copy_view(Strided { storage: rhs.storage, layout: &from, dtype })?;
                let layout = if once { Layout::new(vec![batch, k, n], vec![0, n, 1], 0) } else { crate::kernels::dense(&[batch, k, n]) };
                return self.matmul_cut_op(lhs, Strided { storage: copied.as_ref(), layout: &layout, dtype }, bias, cut).map(|y| Some(vec![y]));
            }
            MatmulPlan::Small { block } => {
                let meta = meta(plan::cut_k(k, 1)).ok_or_else(no_meta)?;
                return self.small_product(&lhs, &rhs, bias.as_ref(), [batch, m, n], (b_load, block), meta, false).map(|y| Some(vec![y]));
            }
            MatmulPlan::Heads => return self.heads_product(&lhs, &rhs, [batch, m, n], meta(plan::cut_k(k, 1)).ok_or_else(no_meta)?).map(|y| Some(vec![y])),
            MatmulPlan::Cpu => {
                let why = if caps.computes(dtype) { WIDE } else { Why::Unsupported };
                return self.fallback1(format!("matmul ({dtype})"), why, &[lhs, rhs], dtype, |cpu, v| cpu.matmul(v[0], v[1])).map(|y| Some(vec![y]));
            }
        };
        // A wide product writes the kernel's f32 sums as they are: no rounding, packing or bias.
        let tiled = if wide { Tiled { packs_y: false, bias_in_kernel: false, tunable: None, ..tiled } } else { tiled };
        // The row sums take the rule's cut: the autotune times plain products.
        let tiled = if rows { Tiled { tunable: None, ..tiled } } else { tiled };
        // GELU's epilogues: the rule's cut, on the tiled kernel with K whole.
        if own_epilogue && (tiled.coop.is_some() || tiled.splits > 1 || packed || dtype != DType::F32 || !(gelu.is_some() || tiled.bias_in_kernel)) {
            return Ok(None);
        }
        let tiled = if own_epilogue { Tiled { tunable: None, ..tiled } } else { tiled };
        let gelu_out = if matches!(extra, Extra::Gelu) { Some(self.output(dtype, batch * m * n)?) } else { None };
        let row_sums = if rows { Some(self.output(if wide { DType::F32 } else { dtype }, m)?) } else { None };
        let out = match (wide, tiled.packs_y) {
            (true, _) => self.output(DType::F32, batch * m * n)?,
            (false, true) => self.packed_output(batch * m * n)?,
            (false, false) => self.output(dtype, batch * m * n)?,
        };
        // Records the product as `t` cuts it; `false`: the tensor-core kernel failed to build
        // (f16 has left the tensor cores for good).
        let run = |t: &Tiled| -> Result<bool> {
            let meta = meta(t.k_ranges).ok_or_else(no_meta)?;
            let ((tm, tn), splits) = (t.tile, t.splits);
            let groups = |count: usize| count.clamp(1, 65_535) as u32;
            let grid = (groups(n.div_ceil(tn)), groups(m.div_ceil(tm)), groups(batch * splits));
            // The kernel's own epilogue where K is whole; else the sum of the splits'.
            let (packs_y, bias_in_kernel) = (t.packs_y && splits == 1, t.bias_in_kernel && splits == 1);
            let partial = splits > 1 || wide;
            let key = |variant| coop::Key { variant, a: a_load, b: b_load, partial, packed, packs_y, bias: bias_in_kernel, rows };
            let kernel = match t.coop {
                Some(variant) => match coop::kernel(gpu, key(variant)) {
                    Some(k) => k,
                    None => return Ok(false),
                },
                None => {
                    let epilogue = match extra {
                        Extra::GeluGrad(_) => Epilogue::GeluGrad,
                        Extra::Gelu => Epilogue::BiasGelu,
                        _ if bias_in_kernel => Epilogue::Bias,
                        _ => Epilogue::None,
                    };
                    let v = Variant { h: tm as u32 / 64, a: a_load, b: b_load, out4: n % 4 == 0, partial, packed, epilogue };
                    gpu.kernel(Key { dtype, v })?
                }
            };
            // Packed bf16 on the tensor cores binds its operands' scales after y, then the bias.
            let amax = match (t.coop, packed) {
                (Some(_), true) => Some(self.operand_amax(&lhs, &rhs, true)?),
                _ => None,
            };
            let partials = if splits > 1 { Some(gpu.alloc((splits * batch * m * n * if dtype == DType::F64 { 8 } else { 4 }) as u64)?) } else { None };
            // The row sums after y (a split's apart where K is split).
            let row_partials = match (&row_sums, splits > 1) {
                (Some(_), true) => Some(gpu.alloc((splits * m * 4) as u64)?),
                _ => None,
            };
            let mut buffers: PerOperand<_> =
                smallvec::smallvec![gpu_storage(&lhs).buffer(), gpu_storage(&rhs).buffer(), partials.as_ref().map_or(out.buffer(), |p| p.buffer())];
            buffers.extend(amax.as_ref().map(|a| a.buffer()));
            buffers.extend(row_partials.as_ref().map(|p| p.buffer()).or(row_sums.as_ref().map(|r| r.buffer())));
            let bias_in = match (&bias, t.bias_in_kernel) {
                (Some(b), true) => {
                    Some((gpu_storage(b).buffer(), u32::try_from(b.layout.offset()).map_err(|_| gpu.err("matmul", "a bias offset past 32 bits"))?))
                }
                _ => None,
            };
            let mut meta = meta;
            if let (Some((buffer, offset)), true) = (bias_in, bias_in_kernel) {
                meta.bias_offset = offset;
                buffers.push(buffer);
            }
            // GELU's input where the bias would be (a product has one or the other); GELU's
            // output after the bias.
            if let Some(h) = &gelu {
                meta.bias_offset = u32::try_from(h.layout.offset()).map_err(|_| gpu.err("matmul", "an offset past 32 bits"))?;
                buffers.push(gpu_storage(h).buffer());
            }
            buffers.extend(gelu_out.as_ref().map(|g| g.buffer()));
            gpu.dispatch(&kernel, &words(&meta), &buffers, grid)?;
            match &partials {
                Some(p) if t.packs_y => self.sum_packed(splits, [batch * m * n, n], p.buffer(), out.buffer(), bias_in)?,
                Some(p) if bias_in.is_some() && !wide => {
                    let bias = bias_in.expect("tested above");
                    self.sum_bias(dtype, splits, [batch * m * n, n], p.buffer(), out.buffer(), bias)?
                }
                Some(p) => self.sum_partials(if wide { DType::F32 } else { dtype }, splits, batch * m * n, p.buffer(), out.buffer())?,
                None => {}
            }
            if let (Some(p), Some(r)) = (&row_partials, &row_sums) {
                self.sum_partials(if wide { DType::F32 } else { dtype }, splits, m, p.buffer(), r.buffer())?;
            }
            Ok(true)
        };
        // The autotune (`tune.rs`), where it is on, times the tiled kernel's cuts where the
        // output is the same in each (not packed bf16).
        let tiled = match tiled.tunable {
            None => tiled,
            Some(rule) => {
                let at = |cut| match plan::matmul(&call, &caps, &options, Some(cut)) {
                    MatmulPlan::Tiled(t) => Ok(t),
                    _ => Err(gpu.err("matmul", "a tuned cut off the tiled kernel")),
                };
                let candidates = || {
                    let tiles: &[usize] = if dtype == DType::F64 { &[64] } else { &[64, 128] };
                    // f64 partial sums take twice the bytes: counted as twice the outputs.
                    let total = batch * m * n * if dtype == DType::F64 { 2 } else { 1 };
                    let groups = |tile: usize| m.div_ceil(tile) * n.div_ceil(tile) * batch;
                    let fits = |tile, s| call.meta_fits(plan::cut_k(k, s)) && crate::tune::split_fits(tile, s, groups, total, gpu.max_binding());
                    crate::tune::candidates(rule, tiles, k, fits)
                };
                let shape = Shape::Matmul { dtype, batch, m, k, n, a: a_load, b: b_load };
                at(gpu.tuned_cut(shape, rule, candidates, |c| run(&at(c)?).map(drop))?)?
            }
        };
        if !run(&tiled)? {
            return self.product_op(lhs, rhs, bias, cut, extra);
        }
        let out = Arc::new(out) as Storage;
        let y = match bias {
            Some(b) if !tiled.bias_in_kernel => self.add_bias(out, &[batch, m, n], &b, vec![0, 0, 1])?,
            _ => out,
        };
        let second = row_sums.or(gelu_out).map(|r| Arc::new(r) as Storage);
        Ok(Some(std::iter::once(y).chain(second).collect()))
    }
}

/// What a product writes besides its result, or how.
#[derive(Clone, Copy, Debug)]
enum Extra<'a> {
    None,
    /// The sums in f32 as they are (`ops::MatmulWide`; no rounding, packing or bias).
    Wide,
    /// Wide, and a's row sums in f32, a second result (`ops::LinearGrads`).
    WideRows,
    /// Each f32 sum times GELU's gradient at this matrix's element (`ops::MatmulGeluBackward`).
    GeluGrad(Strided<'a>),
    /// With the bias, GELU of y written as a second result (`ops::LinearGelu`).
    Gelu,
}

crate::shader_params! {
    /// `shaders/matmul/sum_packed.wgsl`: `numel` outputs of `n` columns, each summed over
    /// `splits` partial sums, plus the bias from `bias_offset` where there is one.
    pub(crate) struct SumPackedParams {
        pub numel: u32,
        pub splits: u32,
        pub n: u32,
        pub bias_offset: u32,
    }
}

/// The sum of a packed bf16 product's splits of K, written packed (`shaders/matmul/sum_packed.wgsl`),
/// with a linear layer's packed bias added where `bias`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SumPackedKey {
    bias: bool,
}

impl KernelKey for SumPackedKey {
    fn source(&self, repr: &Repr) -> String {
        let w = with_words(Wgsl::new(repr).params::<SumPackedParams>()).flag("BIAS", self.bias);
        let w = if self.bias {
            w.part(include_str!("../shaders/matmul/sum_bias_packed.wgsl"))
        } else {
            w.part(include_str!("../shaders/matmul/sum_no_bias_packed.wgsl"))
        };
        w.part(include_str!("../shaders/matmul/sum_packed.wgsl")).part(crate::packed::ENTRY2).build()
    }

    fn all(_: &Repr) -> Vec<SumPackedKey> {
        vec![SumPackedKey { bias: false }, SumPackedKey { bias: true }]
    }
}

/// The sum of an f32 or f16 product's splits of K with a linear layer's bias added, rounded once
/// (`shaders/matmul/sum_bias.wgsl`; its block is [`SumPackedParams`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SumBiasKey {
    dtype: DType,
}

impl KernelKey for SumBiasKey {
    fn source(&self, repr: &Repr) -> String {
        Wgsl::new(repr).params::<SumPackedParams>().ty("x", self.dtype).part(include_str!("../shaders/matmul/sum_bias.wgsl")).build()
    }

    fn all(repr: &Repr) -> Vec<SumBiasKey> {
        [DType::F32, DType::F16].into_iter().filter(|&d| repr.computes(d)).map(|dtype| SumBiasKey { dtype }).collect()
    }
}

impl WgpuBackend {
    /// y (`dtype`, f32 or f16) of `numel` elements in rows of `n` from `splits` ranges of f32
    /// partial sums in `partials`, plus the `bias` (buffer, element offset) of each column.
    fn sum_bias(
        &self,
        dtype: DType,
        splits: usize,
        [numel, n]: [usize; 2],
        partials: &wgpu::Buffer,
        y: &wgpu::Buffer,
        bias: (&wgpu::Buffer, u32),
    ) -> Result<()> {
        let gpu = self.gpu()?;
        let u = |v: usize| u32::try_from(v).map_err(|_| gpu.err("matmul", "a product past 32-bit sizes"));
        let meta = SumPackedParams { numel: u(numel)?, splits: u(splits)?, n: u(n)?, bias_offset: bias.1 };
        let kernel = gpu.kernel(SumBiasKey { dtype })?;
        gpu.dispatch(&kernel, &words(&meta), &[partials, y, bias.0], crate::kernels::grid(numel))
    }

    /// y, packed bf16 of `numel` elements in rows of `n` (both even), from `splits` ranges of
    /// f32 partial sums in `partials`, plus the packed `bias` (buffer, element offset) of each
    /// column where there is one.
    fn sum_packed(&self, splits: usize, [numel, n]: [usize; 2], partials: &wgpu::Buffer, y: &wgpu::Buffer, bias: Option<(&wgpu::Buffer, u32)>) -> Result<()> {
        let gpu = self.gpu()?;
        let u = |v: usize| u32::try_from(v).map_err(|_| gpu.err("matmul", "a product past 32-bit sizes"));
        let meta = SumPackedParams { numel: u(numel)?, splits: u(splits)?, n: u(n)?, bias_offset: bias.map_or(0, |b| b.1) };
        let kernel = gpu.kernel(SumPackedKey { bias: bias.is_some() })?;
        let mut buffers = vec![partials, y];
        buffers.extend(bias.map(|b| b.0));
        gpu.dispatch(&kernel, &words(&meta), &buffers, crate::kernels::grid(numel.div_ceil(2)))
    }

    /// The one-dispatch kernel's product (`plan::MatmulPlan::Small`) of `[batch, m, n]`
    /// outputs, b loaded as `b_load`, in blocks of y `block`, with the tiled kernel's meta block
    /// (`meta`, whose split it ignores) and the bias, if any, added as the sums are stored;
    /// packed bf16 operands give an unpacked y; `wide`: the sums are written in f32.
    #[allow(clippy::too_many_arguments)]
    fn small_product(
        &self,
        lhs: &Strided,
        rhs: &Strided,
        bias: Option<&Strided>,
        [batch, m, n]: [usize; 3],
        (b_load, block): (Load, (u32, u32)),
        mut meta: MatmulParams,
        wide: bool,
    ) -> Result<Storage> {
        let gpu = self.gpu()?;
        let dtype = lhs.dtype;
        let out = self.output(if wide { DType::F32 } else { dtype }, batch * m * n)?;
        let kernel = gpu.kernel(SmallKey { dtype, packed: packed_view(lhs), b: b_load, bias: bias.is_some(), block, wide })?;
        let groups = |count: usize| count.clamp(1, 65_535) as u32;
        let grid = (groups(n.div_ceil(block.1 as usize)), groups(m.div_ceil(block.0 as usize)), groups(batch));
        let mut buffers: PerOperand<_> = smallvec::smallvec![gpu_storage(lhs).buffer(), gpu_storage(rhs).buffer(), out.buffer()];
        if let Some(b) = bias {
            meta.bias_offset = u32::try_from(b.layout.offset()).map_err(|_| gpu.err("matmul", "a bias offset past 32 bits"))?;
            buffers.push(gpu_storage(b).buffer());
        }
        gpu.dispatch(&kernel, &words(&meta), &buffers, grid)?;
        drop(buffers);
        Ok(Arc::new(out) as Storage)
    }

    /// A batch of small products on `shaders/matmul/heads.wgsl`, one 80 x 80 tile a product
    /// (`plan::MatmulPlan::Heads`), with the tiled kernel's meta block (`meta`, K in one range);
    /// packed bf16 operands give an unpacked y.
    fn heads_product(&self, lhs: &Strided, rhs: &Strided, [batch, m, n]: [usize; 3], meta: MatmulParams) -> Result<Storage> {
        let gpu = self.gpu()?;
        let dtype = lhs.dtype;
        let out = self.output(dtype, batch * m * n)?;
        let kernel = gpu.kernel(HeadsKey { dtype, packed: packed_view(lhs) })?;
        let groups = |count: usize| count.clamp(1, 65_535) as u32;
        let grid = (groups(n.div_ceil(HEADS_TILE)), groups(m.div_ceil(HEADS_TILE)), groups(batch));
        gpu.dispatch(&kernel, &words(&meta), &[gpu_storage(lhs).buffer(), gpu_storage(rhs).buffer(), out.buffer()], grid)?;
        HEADS_RECORDED.with(|c| c.set(c.get() + 1));
        Ok(Arc::new(out) as Storage)
    }
}
