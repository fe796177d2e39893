//! Winograd F(4x4, 3x3) (Lavin and Gray, 2016) for f32 3x3 convolutions of stride 1,
//! padding 1, no dilation and one group. The forward: each 4 x 4 tile of the output is 36
//! products of a transformed 6 x 6 input patch with a transformed kernel, where the direct
//! convolution takes 144, so the 36 batched products (`[M, K] x [K, P]`, one per point of the
//! 6 x 6 transform, P the tiles) do 4x fewer multiply-adds than the implicit GEMM. Four
//! dispatches: the kernels' transform (`shaders/conv/winograd/weight.wgsl`), the patches'
//! (`input.wgsl`), the batched product (the ordinary matmul), the outputs' (`output.wgsl`);
//! the transforms themselves are `transforms.wgsl`.
//!
//! The input gradient of such a convolution is the same convolution of dy with each kernel
//! turned by 180 degrees and its channels swapped, which the kernels' transform reads so. The
//! weight gradient is F(3x3, 4x4), the transpose of the forward's algorithm: each tile's 4 x 4
//! of dy transformed (`dy.wgsl`) times the same transformed patches of x, summed over the tiles
//! by the products (`[O, P] x [P, C]`, 36 of them), then 6 x 6 back to 3 x 3 taps
//! (`weight_out.wgsl`). The transforms' coefficients (up to 8, and 1/24) round more than the
//! direct sum: within about one f32 epsilon times the terms summed times the sum of |x||w|
//! of an output on the cases of `tests/conv_winograd.rs`, which checks all three passes
//! against the CPU's direct convolution. (F(2x2, 3x3), 2.25x fewer multiply-adds, rounds less
//! and ran slower on the H200: docs/PERFORMANCE.md, runs 136-140.) An infinity or NaN in a
//! patch reaches every output of its tile, and an infinity may come out as NaN: outputs the
//! direct convolution leaves finite beside it may not be, but none it makes non-finite comes
//! out finite (a loss scaler still sees it).
//!
//! Where it runs ([`wanted`]): the rule takes layers of at least [`MIN_CHANNELS`] input and
//! output channels, where the products' work outweighs the transforms' memory traffic (on the
//! H200 resnet18's 3-channel stem ran 2.7-3x slower this way, its 64-channel layers 1.2-1.9x
//! faster), and whose intermediates stay under [`MAX_INTERMEDIATE`]. Passes the tensor cores
//! take (f16, or f32 under `LIANDAN_CONV_TF32`) stay there. `LIANDAN_CONV_WINOGRAD=0` turns it
//! off (the implicit GEMM for every pass), `=1` on for every convolution it can take, to
//! compare. The intermediates are the transformed input and output (`36 P K` and `36 P M`
//! f32s, P = N H W / 16: 2.25x the input and the output) and the transformed kernels, held for
//! the pass alone.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use liandan_tensor::{ConvGeometry, DType, Layout, Result, Storage, Strided};

use super::{wgpu_buffer, Pass};
use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::repr::Repr;

const TRANSFORMS: &str = include_str!("../shaders/conv/winograd/transforms.wgsl");
const PUT: &str = include_str!("../shaders/conv/winograd/put.wgsl");
const ROWS: &str = include_str!("../shaders/conv/winograd/rows.wgsl");
const TILES: &str = include_str!("../shaders/conv/winograd/tiles.wgsl");
const INPUT: &str = include_str!("../shaders/conv/winograd/input.wgsl");
const WEIGHT: &str = include_str!("../shaders/conv/winograd/weight.wgsl");
const OUTPUT: &str = include_str!("../shaders/conv/winograd/output.wgsl");
const DY: &str = include_str!("../shaders/conv/winograd/dy.wgsl");
const WEIGHT_OUT: &str = include_str!("../shaders/conv/winograd/weight_out.wgsl");

/// Outputs a tile along each axis, and points a patch.
const R: usize = 4;
const T: usize = R + 2;
/// The products: one per point of a patch.
const PRODUCTS: usize = T * T;

/// The rule's least channel count on both sides of the product (see the module docs).
pub(super) const MIN_CHANNELS: usize = 64;
/// The largest intermediate (bytes) the rule accepts: past it the implicit GEMM, which needs
/// none, runs (56 x 56 images of 256 channels at batch 128 would need 925 MB for each of two).
const MAX_INTERMEDIATE: usize = 256 << 20;

/// One of the transforms (the product between them is the matmul's kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// The patches of x (or dy) into `[36, K, P]`.
    Input,
    /// The kernels into `[36, M, K]`; `flip`: the input gradient's (turned, channels swapped).
    Weight { flip: bool },
    /// The products `[36, M, P]` into y `[N, M, H, W]`.
    Output,
    /// The weight gradient's dy into `[36, O, P]`.
    Dy,
    /// The weight gradient's products `[36, O, C]` into dw `[O, C, 3, 3]`.
    WeightOut,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).ty("x", DType::F32).part(TRANSFORMS);
        // The stages that store 36 matrices share `put`; those that read them, the rows; those
        // that walk the tiles, `tile_at`.
        match *self {
            Key::Input => w.part(PUT).part(TILES).part(INPUT),
            Key::Weight { flip } => w.flag("FLIP", flip).part(PUT).part(WEIGHT),
            Key::Dy => w.part(PUT).part(TILES).part(DY),
            Key::Output => w.part(ROWS).part(TILES).part(OUTPUT),
            Key::WeightOut => w.part(ROWS).part(WEIGHT_OUT),
        }
        .build()
    }

    fn all(_: &Repr) -> Vec<Key> {
        vec![Key::Input, Key::Weight { flip: false }, Key::Weight { flip: true }, Key::Output, Key::Dy, Key::WeightOut]
    }
}

thread_local! {
    /// `with_conv_winograd`'s setting on this thread: `None` leaves it to the environment.
    static FORCED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// `LIANDAN_CONV_WINOGRAD`, read once: `Some(false)` for `0`, `off` or `false`, `Some(true)`
/// (every convolution it can take) for `1`, `on` or `true`, `None` (the rule) otherwise.
fn env_setting() -> Option<bool> {
    static SETTING: OnceLock<Option<bool>> = OnceLock::new();
    *SETTING.get_or_init(|| match std::env::var("LIANDAN_CONV_WINOGRAD").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Ok("0" | "off" | "false") => Some(false),
        Ok("1" | "on" | "true") => Some(true),
        _ => None,
    })
}

/// Runs `f` with every convolution Winograd can take running on it (`true`) or none (`false`)
/// on this thread, over `LIANDAN_CONV_WINOGRAD` and the rule: for tests and benchmarks.
#[doc(hidden)]
pub fn with_conv_winograd<F: FnOnce() -> O, O>(on: bool, f: F) -> O {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FORCED.with(|c| c.replace(Some(on))));
    f()
}

/// Whether a pass of `g` on these operands (two: no bias) runs as Winograd: a shape it
/// computes, and the setting or the rule says so. The caller keeps passes the tensor cores
/// take off it.
pub(super) fn wanted(g: &ConvGeometry, dtype: DType, inputs: &[Strided]) -> bool {
    let shape = g.kernel == (3, 3) && g.stride == (1, 1) && g.padding == (1, 1) && g.dilation == (1, 1) && g.groups == 1;
    let operands = inputs.len() == 2 && inputs.iter().all(|v| v.layout.is_contiguous());
    if dtype != DType::F32 || !shape || !operands || g.n * g.h * g.w == 0 {
        return false;
    }
    FORCED.with(|c| c.get()).or_else(env_setting).unwrap_or_else(|| {
        let tiles = g.n * g.h.div_ceil(R) * g.w.div_ceil(R);
        let small = PRODUCTS * 4 * tiles * g.c.max(g.o) <= MAX_INTERMEDIATE;
        g.c >= MIN_CHANNELS && g.o >= MIN_CHANNELS && small
    })
}

impl WgpuBackend {
    /// `pass` of `g` as Winograd (see the module docs), or `None` where an intermediate would
    /// pass 32-bit indexing or one binding.
    pub(super) fn conv_winograd(&self, pass: Pass, g: &ConvGeometry, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let (h, wd) = (g.h, g.w);
        let (tw, tiles) = (wd.div_ceil(R), h.div_ceil(R) * wd.div_ceil(R));
        let nt = PRODUCTS;
        let p = g.n * tiles;
        // The product's rows and columns (the weight gradient's), or rows and depth.
        let (m, k) = match pass {
            Pass::Forward | Pass::Weight => (g.o, g.c),
            Pass::Input => (g.c, g.o),
        };
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        let fits = |numel: usize| u32::try_from(numel).is_ok() && self.repr.buffer_bytes(DType::F32, numel) <= limit;
        if ![nt * m * k, nt * k * p, nt * m * p, g.n * m * h * wd, 9 * m * k].into_iter().all(fits) {
            return None;
        }
        let words = |v: &[usize]| v.iter().map(|&w| u32::try_from(w).ok()).collect::<Option<Vec<u32>>>();
        let (a, b) = (&inputs[0], &inputs[1]);
        // The patches' transform of x (or dy): b of the forward's product (and the input
        // gradient's), b transposed of the weight gradient's.
        let patches = if pass == Pass::Weight { b } else { a };
        let input_meta = words(&[k * p, p, tiles, tw, h, wd, patches.layout.offset(), k])?;
        let (first_meta, output_meta) = match pass {
            Pass::Weight => (words(&[m * p, p, tiles, tw, h, wd, a.layout.offset(), m])?, words(&[m * k])?),
            _ => (words(&[m * k, m, k, b.layout.offset()])?, words(&[m * p, p, tiles, tw, h, wd, m])?),
        };
        Some((|| {
            // a of the product: the kernels' transform, or dy's (the weight gradient).
            let (first, a_len, out_len) = match pass {
                Pass::Forward => (Key::Weight { flip: false }, nt * m * k, g.n * m * h * wd),
                Pass::Input => (Key::Weight { flip: true }, nt * m * k, g.n * m * h * wd),
                Pass::Weight => (Key::Dy, nt * m * p, 9 * m * k),
            };
            let (from, count) = if pass == Pass::Weight { (a, m * p) } else { (b, m * k) };
            let u = Arc::new(self.output(DType::F32, a_len)?) as Storage;
            let kernel = gpu.kernel(first)?;
            gpu.dispatch(&kernel, &first_meta, &[gpu_storage(from).buffer(), wgpu_buffer(&u)], grid(count))?;
            let v = Arc::new(self.output(DType::F32, nt * k * p)?) as Storage;
            let kernel = gpu.kernel(Key::Input)?;
            gpu.dispatch(&kernel, &input_meta, &[gpu_storage(patches).buffer(), wgpu_buffer(&v)], grid(k * p))?;
            let (lu, lv) = match pass {
                // [36, O, P] x [36, C, P] transposed.
                Pass::Weight => (Layout::new(vec![nt, m, p], vec![m * p, p, 1], 0), Layout::new(vec![nt, p, k], vec![k * p, 1, p], 0)),
                _ => (Layout::new(vec![nt, m, k], vec![m * k, k, 1], 0), Layout::new(vec![nt, k, p], vec![k * p, p, 1], 0)),
            };
            let product = self.matmul_op(Strided { storage: &*u, layout: &lu, dtype: DType::F32 }, Strided { storage: &*v, layout: &lv, dtype: DType::F32 })?;
            let y = self.output(DType::F32, out_len)?;
            let last = if pass == Pass::Weight { Key::WeightOut } else { Key::Output };
            let kernel = gpu.kernel(last)?;
            let count = if pass == Pass::Weight { m * k } else { m * p };
            gpu.dispatch(&kernel, &output_meta, &[wgpu_buffer(&product), y.buffer()], grid(count))?;
            Ok(vec![Arc::new(y) as Storage])
        })())
    }
}
