//! The f16 matmul on cooperative matrices (`shaders/matmul_coop.wgsl`): the same operands, meta
//! block, grid and split of K as the tiled kernel of `matmul.rs`, on the tiles of a [`Variant`].
//! `plan/matmul.rs` picks it wherever `coop.rs` found the adapter able to run it; the tiles of
//! each variant are `plan/coop.rs`.
//!
//! Packed bf16 products run here too, each operand scaled by a power of two into f16's range
//! as it is fetched (`shaders/matmul_coop/scaled.wgsl`, as a bf16 convolution's: a bf16
//! value's 8 significant bits fit f16's 11), their largest magnitudes found first by
//! [`AmaxKey`]'s scan; y is written packed where the tiled kernel would write it so, a linear
//! layer's bias added as it is.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use liandan_tensor::{DType, Result, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::gpu::{Gpu, Kernel};
use crate::kernels::{KernelKey, Wgsl};
use crate::packed::with_words;
use crate::params::words;
use crate::plan::{Load, Variant};
use crate::pool::PooledBuffer;
use crate::repr::Repr;

pub(crate) const MATMUL_COOP: &str = include_str!("../shaders/matmul_coop.wgsl");
/// The set-up of scaled operands, their reads, and the scaled sums' stores, which the
/// convolutions share.
pub(crate) const SCALED: &str = include_str!("../shaders/matmul_coop/scaled.wgsl");
pub(crate) const RAW_SCALED: &str = include_str!("../shaders/matmul_coop/raw_scaled.wgsl");
pub(crate) const OUT_SCALED: &str = include_str!("../shaders/matmul/out_scaled.wgsl");
pub(crate) const OUT_SCALED_PARTIAL: &str = include_str!("../shaders/matmul/out_scaled_partial.wgsl");
pub(crate) const STORE_ROUNDED: &str = include_str!("../shaders/matmul_coop/store_rounded.wgsl");
/// Sums stored as they are (what every product but a convolution's with its bias adds).
pub(crate) const AS_IS: &str = include_str!("../shaders/matmul_coop/as_is.wgsl");
/// No row sums of a beside the product (every kernel but `ops::LinearGrads`'s).
pub(crate) const ROWS_NONE: &str = include_str!("../shaders/matmul_coop/rows_none.wgsl");
const OUT_ROUNDED: &str = include_str!("../shaders/matmul/out_rounded.wgsl");
const OUT_PARTIAL: &str = include_str!("../shaders/matmul/out_partial.wgsl");
const WRITE: &str = include_str!("../shaders/matmul/write.wgsl");
use super::ENTRY;

/// One kernel: the variant, how each operand's slices are read, and whether the kernel writes
/// f32 partial sums over a split of K (for `reduce` to add up) rather than f16 results.
/// `packed`: the operands are packed bf16, scaled into f16 (see the module docs); then
/// `packs_y`: y is packed bf16 too (N a multiple of 4, K not split; else f32 words rounded to
/// bf16, or partial sums), and `bias`: a linear layer's bias is added as y is stored (packed y,
/// or f16 y of an even N, two columns an invocation); `rows`: a's rows are summed in f32 beside
/// the product (`ops::LinearGrads`, wide: f16 a read along M, partial sums).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) variant: Variant,
    pub(crate) a: Load,
    pub(crate) b: Load,
    pub(crate) partial: bool,
    pub(crate) packed: bool,
    pub(crate) packs_y: bool,
    pub(crate) bias: bool,
    pub(crate) rows: bool,
}

/// The pipeline for `key` (this matmul's, or a convolution's on cooperative matrices), or
/// `None` (with a warning, once) when this device's driver will not build it: f16 matmuls and
/// convolutions then go back to the ordinary kernels for good (the caller starts over, as the
/// tiles may differ).
pub(crate) fn kernel(gpu: &Gpu, key: impl Into<crate::Key>) -> Option<Arc<Kernel>> {
    match gpu.kernel(key) {
        Ok(k) => Some(k),
        Err(e) => {
            if gpu.coop_f16.swap(false, Ordering::Relaxed) {
                eprintln!("liandan: a tensor-core f16 kernel failed to build ({e}); f16 matmuls and convolutions use the ordinary kernels from now on");
            }
            None
        }
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let load = |l: Load| match l {
            Load::K => 0,
            Load::Outer => 1,
            Load::Strided => 2,
        };
        let Key { variant, a, b, partial, packed, packs_y, bias, rows } = *self;
        // matmul's bindings: vec4 reads where the loader reads vec4s, results written as scalars
        // (or pairs of packed bf16).
        let (read_a, read_b) = (super::read_a(a != Load::Strided, packed), super::read_b(b != Load::Strided, packed));
        let w = Wgsl::new(repr).params::<super::MatmulParams>().enable("wgpu_cooperative_matrix").uint("A_LOAD", load(a)).uint("B_LOAD", load(b));
        let w = match packed {
            true => with_words(w.enable("f16").ty("x", DType::BF16)),
            false => w.ty("x", DType::F16),
        };
        let w = w.part(read_a).part(read_b);
        let w = match (packed, partial) {
            (false, false) if bias => w.part(OUT_ROUNDED).part(include_str!("../shaders/matmul_coop/write2_bias.wgsl")),
            (false, false) => w.part(OUT_ROUNDED).part(WRITE),
            (false, true) => w.part(OUT_PARTIAL).part(WRITE),
            (true, true) => w.part(OUT_SCALED_PARTIAL).part(WRITE),
            (true, false) if packs_y => {
                let bias =
                    if bias { include_str!("../shaders/matmul_coop/bias_packed.wgsl") } else { include_str!("../shaders/matmul_coop/no_bias_packed.wgsl") };
                w.part(OUT_SCALED).part(bias).part(include_str!("../shaders/matmul_coop/write2_packed.wgsl"))
            }
            (true, false) => w.part(OUT_SCALED).part(WRITE),
        };
        // The f16 values as stored, without the f32 round trip of matmul's fetch_* helpers; or
        // the packed bf16 ones widened and scaled.
        let w = match packed {
            true => w.part(RAW_SCALED).part(SCALED),
            false => {
                let raw_a =
                    if a == Load::Strided { include_str!("../shaders/matmul_coop/raw_a.wgsl") } else { include_str!("../shaders/matmul_coop/raw_a4.wgsl") };
                let raw_b =
                    if b == Load::Strided { include_str!("../shaders/matmul_coop/raw_b.wgsl") } else { include_str!("../shaders/matmul_coop/raw_b4.wgsl") };
                let store = if partial { include_str!("../shaders/matmul_coop/store_partial.wgsl") } else { STORE_ROUNDED };
                w.part(raw_a).part(raw_b).part(store)
            }
        };
        let (sgm, sgn) = variant.subgroups();
        let (a_vecs, b_vecs) = variant.staged_vecs(a, b);
        let w = w
            .uint("SGM", sgm)
            .uint("SGN", sgn)
            .uint("FM", variant.fragment_rows())
            // One tile a workgroup without the loops where the grid covers every tile: faster for
            // `Prefetch`'s large products on the H200; the zoo's products (on `Tall`) did not move.
            .flag("FLAT", variant == Variant::Prefetch)
            .flag("PAIRS", packs_y || (bias && !packed))
            .uint("A_VECS", a_vecs)
            .uint("B_VECS", b_vecs);
        let rows = if rows { include_str!("../shaders/matmul_coop/rows.wgsl") } else { ROWS_NONE };
        w.part(AS_IS)
            .part(rows)
            .part(include_str!("../shaders/matmul_coop/a_fetch.wgsl"))
            .part(include_str!("../shaders/matmul_coop/b_fetch.wgsl"))
            .part(MATMUL_COOP)
            .part(ENTRY)
            .build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        // The kernel computes on f16 values, so only a device holding f16 natively builds it.
        if !repr.f16 {
            return Vec::new();
        }
        let loads = [Load::K, Load::Outer, Load::Strided];
        let mut out = Vec::new();
        for variant in Variant::MATMUL {
            for a in loads {
                for b in loads {
                    for partial in [false, true] {
                        out.push(Key { variant, a, b, partial, packed: false, packs_y: false, bias: false, rows: false });
                        if !partial {
                            out.push(Key { variant, a, b, partial, packed: false, packs_y: false, bias: true, rows: false });
                        }
                        if partial && a == Load::Outer {
                            out.push(Key { variant, a, b, partial, packed: false, packs_y: false, bias: false, rows: true });
                        }
                        let outs: &[(bool, bool)] = if partial { &[(false, false)] } else { &[(false, false), (true, false), (true, true)] };
                        for &(packs_y, bias) in outs {
                            out.push(Key { variant, a, b, partial, packed: true, packs_y, bias, rows: false });
                        }
                    }
                }
            }
        }
        out
    }
}

/// The scan of a scaled product's operands for their largest magnitudes
/// (`shaders/matmul_coop/amax.wgsl`); `packed`: they are packed bf16 words, else f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AmaxKey {
    pub(crate) packed: bool,
}

impl KernelKey for AmaxKey {
    fn source(&self, repr: &Repr) -> String {
        Wgsl::new(repr).params::<AmaxParams>().flag("PACKED", self.packed).part(include_str!("../shaders/matmul_coop/amax.wgsl")).build()
    }

    fn all(_: &Repr) -> Vec<AmaxKey> {
        vec![AmaxKey { packed: false }, AmaxKey { packed: true }]
    }
}

crate::shader_params! {
    /// `shaders/matmul_coop/amax.wgsl`: the words of each operand it reads, `count` from `start`.
    pub(crate) struct AmaxParams {
        pub a_start: u32,
        pub a_count: u32,
        pub b_start: u32,
        pub b_count: u32,
    }
}

impl WgpuBackend {
    /// The largest finite magnitudes of the views `a` and `b` (over the span of each: a bound
    /// where a view skips elements), as f32 bits in words 0 and 1 of a buffer the scaled
    /// kernels bind (`shaders/matmul_coop/scaled.wgsl`); `packed`: both are packed bf16, else
    /// f32. One dispatch, both operands.
    pub(crate) fn operand_amax(&self, a: &Strided, b: &Strided, packed: bool) -> Result<PooledBuffer> {
        let gpu = self.gpu()?;
        let amax = gpu.alloc(16)?;
        gpu.clear_buffer(amax.buffer(), 0, 16);
        // The words each view's elements lie in.
        let span = |v: &Strided| -> Result<(u32, u32)> {
            let (start, end) = (v.layout.offset(), v.layout.max_extent().max(v.layout.offset()));
            let (start, end) = if packed { (start / 2, end.div_ceil(2)) } else { (start, end) };
            let word = |w: usize| u32::try_from(w).map_err(|_| gpu.err("matmul", "an operand past 32-bit indexing"));
            Ok((word(start)?, word(end - start)?))
        };
        let ((a_start, a_count), (b_start, b_count)) = (span(a)?, span(b)?);
        // Enough workgroups to fill a large GPU, each walking its share a grid apart.
        let groups = (a_count.max(b_count) as usize).div_ceil(256 * 8).clamp(1, 1024) as u32;
        let kernel = gpu.kernel(AmaxKey { packed })?;
        let meta = AmaxParams { a_start, a_count, b_start, b_count };
        gpu.dispatch(&kernel, &words(&meta), &[gpu_storage(a).buffer(), gpu_storage(b).buffer(), amax.buffer()], (groups, 2, 1))?;
        Ok(amax)
    }
}
