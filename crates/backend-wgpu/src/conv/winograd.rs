//! Winograd convolutions (Lavin and Gray, 2016) for f32 3x3 convolutions of stride 1, padding
//! 1 or 0, no dilation and one group, in two sizes: F(2x2, 3x3), each 2 x 2 tile of the output as
//! 16 products of a transformed 4 x 4 input patch with a transformed kernel where the direct
//! convolution has 36 multiply-adds (2.25x fewer), and F(4x4, 3x3), each 4 x 4 tile as 36
//! products of 6 x 6 patches where it has 144 (4x fewer). Each pass is four dispatches: the
//! kernels' transform (`shaders/conv/winograd/f2/weight.wgsl`, `f4/weight.wgsl`), the
//! patches' (`input.wgsl`), the batched products (`[M, K] x [K, P]`, one per point of a patch,
//! P the tiles, on the ordinary f32 matmul), the outputs' (`output.wgsl`). F(4x4)'s transforms
//! (`f4/transforms.wgsl`) apply each 1-D transform to rows held as vec4s with constant indices:
//! arrays indexed in loops were spilled to memory on the H200.
//!
//! The input gradient of such a convolution is the convolution of dy, padded by 2 less the
//! padding, with each kernel turned by 180 degrees and its channels swapped, which the
//! kernels' transform reads so. The
//! weight gradient is the transpose of the forward's algorithm (F(3x3, 2x2), F(3x3, 4x4)):
//! each tile of dy transformed (`dy.wgsl`) times the same transformed patches of x, summed over
//! the tiles by the products (`[O, P] x [P, C]`), then back to 3 x 3 taps (`weight_out.wgsl`).
//!
//! Rounding: F(2x2)'s coefficients are 0, 1/2 and 1, and its results stay within a few f32
//! epsilons times the terms summed times the sum of |x||w| of an output; F(4x4)'s reach 8 and
//! 1/24, and round about 10x more (`tests/conv_winograd.rs` bounds both against the CPU's
//! direct convolution). Through resnet18's batch norms at the parity test's small batch,
//! F(4x4) in every pass moved gradients by up to 5% of their largest (F(2x2) and the direct
//! convolution: within 1e-4), so exact f32 takes F(2x2) for the forward and input gradient,
//! whose rounding flows on through the other layers' gradients, and F(4x4) for the weight
//! gradients, whose rounding stays in that layer's own gradient (resnet18's gradients within
//! 6.0e-6 of PyTorch's on lavapipe, 5.5e-6 on the H200).
//! An infinity or NaN in a patch reaches every output of its tile, and an infinity may come out
//! as NaN: none the direct convolution makes non-finite comes out finite.
//!
//! Where it runs ([`wanted`]): exact f32 (the default) takes F(2x2) for the forward and input
//! gradient of layers of at least [`MIN_CHANNELS_F2`] input and output channels, and F(4x4) for
//! weight gradients from [`MIN_CHANNELS_F4`] (of unpadded convolutions, only the weight
//! gradient: seed003_cnn's 64 -> 512 one); under `conv_tf32` every pass the tensor
//! cores do not take runs as F(4x4) from [`MIN_CHANNELS_F4`] (on the H200 resnet18's
//! 64-channel layers ran slower as F(2x2) than the implicit GEMM, faster as F(4x4); its
//! 3-channel stem slower either way). Intermediates stay under [`MAX_INTERMEDIATE`]. A cut
//! forced on the implicit GEMM (`testing::Knobs::conv_cut`) keeps the rule off, so what is
//! tested under it is the implicit GEMM so cut; `testing::Knobs::conv_winograd` turns it off,
//! or runs every convolution it can take with one tile, for tests. The intermediates are the transformed input and output (T^2 P K and
//! T^2 P M f32s, T = 4 or 6: 4x or 2.25x the input and the output) and the transformed
//! kernels, held for the pass alone; a weight gradient whose products are not split takes its
//! images in chunks whose intermediates stay within [`CHUNK_BYTES`], each chunk's products
//! added to the first's.

use std::sync::Arc;

use liandan_tensor::backend::BinaryOp;
use liandan_tensor::{ConvGeometry, DType, Layout, Result, Storage, Strided};

use super::params::{WinogradInvocations, WinogradKernel, WinogradOutput, WinogradPatch};
use super::{wgpu_buffer, Pass};
use crate::backend::{gpu_storage, WgpuBackend};
use crate::gpu::Gpu;
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::params::{words, ShaderParams};
use crate::repr::Repr;
use crate::WgpuOptions;

/// A stage's source, F(2x2): after the helpers the stage uses.
const F2: [&str; 5] = [
    include_str!("../shaders/conv/winograd/f2/input.wgsl"),
    include_str!("../shaders/conv/winograd/f2/weight.wgsl"),
    include_str!("../shaders/conv/winograd/f2/output.wgsl"),
    include_str!("../shaders/conv/winograd/f2/dy.wgsl"),
    include_str!("../shaders/conv/winograd/f2/weight_out.wgsl"),
];
const F2_ROWS: &str = include_str!("../shaders/conv/winograd/f2/rows.wgsl");
/// F(4x4): after the transforms and the helpers the stage uses.
const F4: [&str; 5] = [
    include_str!("../shaders/conv/winograd/f4/input.wgsl"),
    include_str!("../shaders/conv/winograd/f4/weight.wgsl"),
    include_str!("../shaders/conv/winograd/f4/output.wgsl"),
    include_str!("../shaders/conv/winograd/f4/dy.wgsl"),
    include_str!("../shaders/conv/winograd/f4/weight_out.wgsl"),
];
const F4_TRANSFORMS: &str = include_str!("../shaders/conv/winograd/f4/transforms.wgsl");
const F4_PUT: &str = include_str!("../shaders/conv/winograd/f4/put.wgsl");
const F4_ROWS: &str = include_str!("../shaders/conv/winograd/f4/rows.wgsl");
/// Both: the tile an invocation works on, and the kernels the filter transform reads.
const TILES: &str = include_str!("../shaders/conv/winograd/tiles.wgsl");
const TAPS: &str = include_str!("../shaders/conv/winograd/taps.wgsl");

/// The most bytes a weight gradient's transformed dy and patches take at once where its
/// products are not split (`winograd_weight`): its images go in chunks within it, each chunk's
/// products summed into the first's. On the H200 seed003_cnn's 96 MB in two chunks took its
/// peak 163 -> 123 MiB with its step as fast; chunks of 32 and 16 MiB took it to 109 and 100
/// MiB, the pass 1.4x and 1.9x as slow.
const CHUNK_BYTES: usize = 48 << 20;

/// The rules' least channel counts on both sides of the product (see the module docs).
pub(super) const MIN_CHANNELS_F2: usize = 128;
pub(super) const MIN_CHANNELS_F4: usize = 64;
/// The largest intermediate (bytes) the rules accept: past it the implicit GEMM, which needs
/// none, runs (56 x 56 images of 256 channels at batch 128 would need 925 MB for each of two
/// as F(4x4)).
const MAX_INTERMEDIATE: usize = 256 << 20;

/// The tile: F(2x2, 3x3) or F(4x4, 3x3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Tile {
    F2,
    F4,
}

impl Tile {
    /// Outputs a tile along each axis.
    fn outputs(self) -> usize {
        match self {
            Tile::F2 => 2,
            Tile::F4 => 4,
        }
    }

    /// The products: one per point of a patch.
    fn products(self) -> usize {
        (self.outputs() + 2).pow(2)
    }
}

/// One of the transforms (the products between them are the matmul's kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    stage: Stage,
    tile: Tile,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    /// The patches of x (or dy) into `[T^2, K, P]`.
    Input,
    /// The kernels into `[T^2, M, K]`; `flip`: the input gradient's (turned, channels swapped).
    Weight { flip: bool },
    /// The products `[T^2, M, P]` into y `[N, M, H, W]`.
    Output,
    /// The weight gradient's dy into `[T^2, O, P]`.
    Dy,
    /// The weight gradient's products `[T^2, O, C]` into dw `[O, C, 3, 3]`.
    WeightOut,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let (index, flip) = match self.stage {
            Stage::Input => (0, false),
            Stage::Weight { flip } => (1, flip),
            Stage::Output => (2, false),
            Stage::Dy => (3, false),
            Stage::WeightOut => (4, false),
        };
        let w = Wgsl::new(repr);
        let w = match self.stage {
            Stage::Input | Stage::Dy => w.params::<WinogradPatch>(),
            Stage::Output => w.params::<WinogradOutput>(),
            Stage::Weight { .. } => w.params::<WinogradKernel>(),
            Stage::WeightOut => w.params::<WinogradInvocations>(),
        };
        let w = w.ty("x", DType::F32).flag("FLIP", flip);
        // The stages that walk the tiles share `tile_at`, the filter transforms `tap`; those
        // that read the T^2 products share their tile's rows, F(4x4)'s that store T^2
        // matrices `put`.
        let w = match self.stage {
            Stage::Input | Stage::Dy | Stage::Output => w.part(TILES),
            Stage::Weight { .. } => w.part(TAPS),
            Stage::WeightOut => w,
        };
        match self.tile {
            Tile::F2 => match self.stage {
                Stage::Output | Stage::WeightOut => w.part(F2_ROWS).part(F2[index]),
                _ => w.part(F2[index]),
            },
            Tile::F4 => {
                let w = w.part(F4_TRANSFORMS);
                let w = match self.stage {
                    Stage::Input | Stage::Dy | Stage::Weight { .. } => w.part(F4_PUT),
                    Stage::Output | Stage::WeightOut => w.part(F4_ROWS),
                };
                w.part(F4[index])
            }
        }
        .build()
    }

    fn all(_: &Repr) -> Vec<Key> {
        let stages = [Stage::Input, Stage::Weight { flip: false }, Stage::Weight { flip: true }, Stage::Output, Stage::Dy, Stage::WeightOut];
        [Tile::F2, Tile::F4].into_iter().flat_map(|tile| stages.map(|stage| Key { stage, tile })).collect()
    }
}

/// What runs as Winograd: nothing, every convolution it can take (with this tile, or the
/// rule's), or what the rule takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Off,
    All(Option<Tile>),
    Rule,
}

impl Setting {
    /// The setting of `options`: the testing knob, else the rule (off where a cut is forced on
    /// the implicit GEMM).
    fn of(options: &WgpuOptions) -> Setting {
        match (options.testing.conv_winograd, options.testing.conv_cut) {
            (Some(2), _) => Setting::All(Some(Tile::F2)),
            (Some(4), _) => Setting::All(Some(Tile::F4)),
            (Some(_), _) | (None, Some(_)) => Setting::Off,
            (None, None) => Setting::Rule,
        }
    }
}

/// The rule's tile and least channel count for `pass`: F(4x4) where TF32's rounding was asked
/// for, and for weight gradients, else F(2x2) (see the module docs).
fn rule(pass: Pass, conv_tf32: bool) -> (Tile, usize) {
    if conv_tf32 || pass == Pass::Weight {
        (Tile::F4, MIN_CHANNELS_F4)
    } else {
        (Tile::F2, MIN_CHANNELS_F2)
    }
}

/// The tile a pass of `g` on these operands (two: no bias) runs as Winograd with, or `None`: a
/// shape it computes, and the setting or the rule says so. The caller keeps passes the tensor
/// cores take off it.
pub(super) fn wanted(options: &WgpuOptions, pass: Pass, g: &ConvGeometry, dtype: DType, inputs: &[Strided]) -> Option<Tile> {
    let operands = inputs.len() == 2 && inputs.iter().all(|v| v.layout.is_contiguous());
    if dtype != DType::F32 || !operands {
        return None;
    }
    takes(Setting::of(options), pass, g, options.conv_tf32)
}

/// [`wanted`]'s choice for a pass of `g` under `setting`, its operands aside.
fn takes(setting: Setting, pass: Pass, g: &ConvGeometry, conv_tf32: bool) -> Option<Tile> {
    // Padding of 0 or 1 on both sides (2 - padding for the input gradient's patches of dy).
    let padded = g.padding.0 == g.padding.1 && g.padding.0 <= 1 && g.h.min(g.w) + 2 * g.padding.0 >= 3;
    let shape = g.kernel == (3, 3) && g.stride == (1, 1) && padded && g.dilation == (1, 1) && g.groups == 1;
    if !shape || g.n * g.h * g.w == 0 {
        return None;
    }
    match setting {
        Setting::Off => None,
        Setting::All(tile) => Some(tile.unwrap_or(rule(pass, conv_tf32).0)),
        // Unpadded convolutions by the rule only for the weight gradient (seed003_cnn's second
        // convolution); their forward and input gradient were not timed as Winograd.
        Setting::Rule if g.padding.0 == 0 && pass != Pass::Weight => None,
        Setting::Rule => {
            let (tile, min) = rule(pass, conv_tf32);
            let r = tile.outputs();
            let (oh, ow) = if pass == Pass::Input { (g.h, g.w) } else { (g.out_h(), g.out_w()) };
            let tiles = g.n * oh.div_ceil(r) * ow.div_ceil(r);
            let small = tile.products() * 4 * tiles * g.c.max(g.o) <= MAX_INTERMEDIATE;
            (g.c >= min && g.o >= min && small).then_some(tile)
        }
    }
}

/// How F(4x4)'s 36 products `[m, k] x [k, n]` are cut (`(tile, splits)`): 64 x 64 tiles, and K
/// split where those are fewer than 256, to some 1,152 workgroups in ranges of at least 256 (the
/// partial sums within `limit` bytes). On the H200 the autotune chose exactly these for every
/// product of resnet18's layers, where the matmul's own rule took 128 x 128 tiles for some and
/// split fewer (resnet18's step 8% faster).
fn products_cut(m: usize, k: usize, n: usize, limit: usize) -> (usize, usize) {
    let products = Tile::F4.products();
    let tiles = products * m.div_ceil(64) * n.div_ceil(64);
    let mut splits = if tiles < 256 { 1152usize.div_ceil(tiles).min(k / 256).max(1) } else { 1 };
    while splits > 1 && splits * products * m * n * 4 > limit {
        splits /= 2;
    }
    (64, splits)
}

/// The sizes a pass of a convolution works in: the patches are read from x (for the input
/// gradient from dy, padded by 2 - padding: a stride-1 input gradient is the forward
/// convolution of dy with the turned kernels), and the tiles cover the pass's output (y, whose
/// dy the weight gradient reads, or dx).
struct Frame {
    /// The products' rows and columns (the weight gradient's), or rows and depth.
    m: usize,
    k: usize,
    /// The patches' source: its height, width and the zeros around it.
    ih: usize,
    iw: usize,
    pad: usize,
    /// The output the tiles cover, its tiles a row and an image.
    oh: usize,
    ow: usize,
    tw: usize,
    tiles: usize,
}

impl Frame {
    fn new(pass: Pass, g: &ConvGeometry, tile: Tile) -> Frame {
        let r = tile.outputs();
        let (m, k, ih, iw, pad, oh, ow) = match pass {
            Pass::Forward | Pass::Weight => (g.o, g.c, g.h, g.w, g.padding.0, g.out_h(), g.out_w()),
            Pass::Input => (g.c, g.o, g.out_h(), g.out_w(), 2 - g.padding.0, g.h, g.w),
        };
        Frame { m, k, ih, iw, pad, oh, ow, tw: ow.div_ceil(r), tiles: oh.div_ceil(r) * ow.div_ceil(r) }
    }
}

/// A stage's parameter block, as the dispatch takes it, and its invocations.
struct Block(Vec<u32>, u32);

impl Block {
    fn of<P: ShaderParams>(params: &P, invocations: u32) -> Block {
        Block(words(params), invocations)
    }
}

/// `v` in 32 bits, or `None`.
fn u(v: usize) -> Option<u32> {
    u32::try_from(v).ok()
}

/// The block of a stage over patches (`WinogradPatch`).
#[allow(clippy::too_many_arguments)]
fn patch_block(channels: usize, patches: usize, tiles: usize, tiles_w: usize, (h, w): (usize, usize), offset: usize, pad: usize) -> Option<Block> {
    let invocations = u(channels * patches)?;
    let params = WinogradPatch {
        invocations,
        patches: u(patches)?,
        tiles: u(tiles)?,
        tiles_w: u(tiles_w)?,
        h: u(h)?,
        w: u(w)?,
        offset: u(offset)?,
        channels: u(channels)?,
        pad: u(pad)?,
    };
    Some(Block::of(&params, invocations))
}

/// Runs one stage of `tile` from `from` into `to`, its block's invocations.
fn run_stage(gpu: &Gpu, tile: Tile, stage: Stage, meta: &Block, from: &wgpu::Buffer, to: &wgpu::Buffer) -> Result<()> {
    let kernel = gpu.kernel(Key { stage, tile })?;
    gpu.dispatch(&kernel, &meta.0, &[from, to], grid(meta.1 as usize))
}

impl WgpuBackend {
    /// `pass` of `g` as Winograd (see the module docs), or `None` where an intermediate would
    /// pass 32-bit indexing or one binding.
    pub(super) fn conv_winograd(&self, pass: Pass, g: &ConvGeometry, tile: Tile, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let f = Frame::new(pass, g, tile);
        let Frame { m, k, ih, iw, pad, oh, ow, tw, tiles } = f;
        let nt = tile.products();
        let p = g.n * tiles;
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        let fits = |numel: usize| u32::try_from(numel).is_ok() && self.repr.buffer_bytes(DType::F32, numel) <= limit;
        if ![nt * m * k, nt * k * p, nt * m * p, g.n * m * oh * ow, 9 * m * k].into_iter().all(fits) {
            return None;
        }
        if pass == Pass::Weight {
            return Some(self.winograd_weight(g, tile, inputs, &f));
        }
        let (x, w) = (&inputs[0], &inputs[1]);
        // The products are `[T^2, m, k] x [T^2, k, p]`: the kernels' transform times the
        // patches'.
        let input_meta = patch_block(k, p, tiles, tw, (ih, iw), x.layout.offset(), pad)?;
        let kernel_meta = Block::of(&WinogradKernel { invocations: u(m * k)?, m: u(m)?, k: u(k)?, offset: u(w.layout.offset())? }, u(m * k)?);
        let output = WinogradOutput { invocations: u(m * p)?, patches: u(p)?, tiles: u(tiles)?, tiles_w: u(tw)?, h: u(oh)?, w: u(ow)?, channels: u(m)? };
        let output_meta = Block::of(&output, output.invocations);
        let stage = |stage: Stage, meta: &Block, from: &wgpu::Buffer, to: &wgpu::Buffer| run_stage(gpu, tile, stage, meta, from, to);
        Some((|| {
            let u = Arc::new(self.output(DType::F32, nt * m * k)?) as Storage;
            stage(Stage::Weight { flip: pass == Pass::Input }, &kernel_meta, gpu_storage(w).buffer(), wgpu_buffer(&u))?;
            let v = Arc::new(self.output(DType::F32, nt * k * p)?) as Storage;
            stage(Stage::Input, &input_meta, gpu_storage(x).buffer(), wgpu_buffer(&v))?;
            let lu = Layout::new(vec![nt, m, k], vec![m * k, k, 1], 0);
            let lv = Layout::new(vec![nt, k, p], vec![k * p, p, 1], 0);
            let (lhs, rhs) = (Strided { storage: &*u, layout: &lu, dtype: DType::F32 }, Strided { storage: &*v, layout: &lv, dtype: DType::F32 });
            let cut = (tile == Tile::F4).then(|| products_cut(m, k, p, limit as usize));
            let product = self.matmul_cut_op(lhs, rhs, None, cut)?;
            let y = self.output(DType::F32, g.n * m * oh * ow)?;
            stage(Stage::Output, &output_meta, wgpu_buffer(&product), y.buffer())?;
            Ok(vec![Arc::new(y) as Storage])
        })())
    }

    /// The weight gradient as Winograd, the images in chunks whose transformed dy and patches
    /// take at most [`CHUNK_BYTES`] (each chunk's products summed into the first's), so that
    /// the intermediates of a large batch do not raise the step's peak by their whole size.
    fn winograd_weight(&self, g: &ConvGeometry, tile: Tile, inputs: &[Strided], f: &Frame) -> Result<Vec<Storage>> {
        let &Frame { m, k, ih, iw, pad, oh, ow, tw, tiles } = f;
        let gpu = self.gpu()?;
        let nt = tile.products();
        let (dy, x) = (&inputs[0], &inputs[1]);
        let per_image = self.repr.buffer_bytes(DType::F32, nt * tiles * (m + k));
        // Chunks only where the whole batch's products would not split their K (enough output
        // tiles to fill the GPU): there each chunk adds one product and one add, where a split
        // product's chunks would each be cut and reduced (resnet18's 64- and 128-channel
        // weight gradients: its step 3% slower in 4 and 2 chunks, its peak the same).
        let split = tile == Tile::F4 && products_cut(m, g.n * tiles, k, gpu.max_binding() as usize).1 > 1;
        let chunk_bytes = gpu.options().testing.winograd_chunk.unwrap_or(CHUNK_BYTES);
        let images = if split { g.n } else { (chunk_bytes as u64 / per_image.max(1)).clamp(1, g.n as u64) as usize };
        let err = || gpu.err("conv2d (Winograd)", "a size past 32 bits");
        let stage = |stage: Stage, meta: &Block, from: &wgpu::Buffer, to: &wgpu::Buffer| run_stage(gpu, tile, stage, meta, from, to);
        let mut sum: Option<Storage> = None;
        for i0 in (0..g.n).step_by(images) {
            let p = images.min(g.n - i0) * tiles;
            let dy_meta = patch_block(m, p, tiles, tw, (oh, ow), dy.layout.offset() + i0 * m * oh * ow, 0).ok_or_else(err)?;
            let x_meta = patch_block(k, p, tiles, tw, (ih, iw), x.layout.offset() + i0 * k * ih * iw, pad).ok_or_else(err)?;
            let u = Arc::new(self.output(DType::F32, nt * m * p)?) as Storage;
            stage(Stage::Dy, &dy_meta, gpu_storage(dy).buffer(), wgpu_buffer(&u))?;
            let v = Arc::new(self.output(DType::F32, nt * k * p)?) as Storage;
            stage(Stage::Input, &x_meta, gpu_storage(x).buffer(), wgpu_buffer(&v))?;
            // `[T^2, m, p] x [T^2, p, k]`, the patches read transposed.
            let lu = Layout::new(vec![nt, m, p], vec![m * p, p, 1], 0);
            let lv = Layout::new(vec![nt, p, k], vec![k * p, 1, p], 0);
            let (lhs, rhs) = (Strided { storage: &*u, layout: &lu, dtype: DType::F32 }, Strided { storage: &*v, layout: &lv, dtype: DType::F32 });
            let cut = (tile == Tile::F4).then(|| products_cut(m, p, k, gpu.max_binding() as usize));
            let product = self.matmul_cut_op(lhs, rhs, None, cut)?;
            sum = Some(match sum {
                None => product,
                Some(s) => {
                    let l = crate::kernels::dense(&[nt * m * k]);
                    let (a, b) = (Strided { storage: &*s, layout: &l, dtype: DType::F32 }, Strided { storage: &*product, layout: &l, dtype: DType::F32 });
                    self.binary_op(BinaryOp::Add, a, b)?
                }
            });
        }
        let sum = sum.ok_or_else(|| gpu.err("conv2d (Winograd)", "no images"))?;
        let y = self.output(DType::F32, 9 * m * k)?;
        let invocations = u(m * k).ok_or_else(err)?;
        stage(Stage::WeightOut, &Block::of(&WinogradInvocations { invocations }, invocations), wgpu_buffer(&sum), y.buffer())?;
        Ok(vec![Arc::new(y) as Storage])
    }
}

#[cfg(test)]
mod tests {
    use super::{takes, Pass, Setting, Tile};
    use liandan_tensor::ConvGeometry;

    fn geometry(c: usize, o: usize, h: usize, padding: usize) -> ConvGeometry {
        ConvGeometry { n: 128, c, h, w: h, o, kernel: (3, 3), stride: (1, 1), padding: (padding, padding), dilation: (1, 1), groups: 1 }
    }

    /// The rule takes an unpadded convolution's weight gradient (seed003_cnn's 64 -> 512 one
    /// over 13 x 13 images), not its forward or input gradient; padded ones as before; the
    /// settings take any padding of 0 or 1 where the image has an output.
    #[test]
    fn the_rule_takes_unpadded_convolutions_for_their_weight_gradient_alone() {
        let rule = |pass: Pass, g: ConvGeometry| takes(Setting::Rule, pass, &g, false);
        assert_eq!(rule(Pass::Weight, geometry(64, 512, 13, 0)), Some(Tile::F4));
        assert_eq!(rule(Pass::Forward, geometry(64, 512, 13, 0)), None);
        assert_eq!(rule(Pass::Forward, geometry(256, 256, 13, 0)), None);
        assert_eq!(rule(Pass::Input, geometry(256, 256, 13, 0)), None);
        // mnist_cnn's 32 -> 64: too few channels.
        assert_eq!(rule(Pass::Weight, geometry(32, 64, 26, 0)), None);
        assert_eq!(rule(Pass::Forward, geometry(128, 128, 16, 1)), Some(Tile::F2));
        assert_eq!(rule(Pass::Input, geometry(128, 128, 16, 1)), Some(Tile::F2));
        assert_eq!(rule(Pass::Weight, geometry(64, 64, 32, 1)), Some(Tile::F4));
        let all = |pass: Pass, g: ConvGeometry| takes(Setting::All(Some(Tile::F2)), pass, &g, false);
        assert_eq!(all(Pass::Forward, geometry(8, 8, 3, 0)), Some(Tile::F2));
        assert_eq!(all(Pass::Input, geometry(8, 8, 3, 0)), Some(Tile::F2));
        assert_eq!(all(Pass::Forward, geometry(8, 8, 2, 0)), None, "no output");
        assert_eq!(all(Pass::Forward, geometry(8, 8, 8, 2)), None, "padding 2");
    }
}
