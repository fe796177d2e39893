//! Winograd convolutions (Lavin and Gray, 2016) for 3x3 convolutions of stride 1, padding 1 or
//! 0, no dilation and one group, computed in f32 (f16 operands read as stored and the result
//! rounded as it is stored; packed bf16 operands read as stored too, the result written in f32
//! words and packed after), in two sizes: F(2x2, 3x3), each 2 x 2 tile of the output as
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
//! Where it runs, and how its products are cut: `plan/winograd.rs`.
//!
//! The intermediates are the transformed input and output (T^2 P K and
//! T^2 P M f32s, T = 4 or 6: 4x or 2.25x the input and the output) and the transformed
//! kernels, held for the pass alone; a weight gradient whose products are not split takes its
//! images in chunks (`plan::Winograd::images`), each chunk's products added to the first's.

use std::sync::Arc;

use liandan_tensor::backend::BinaryOp;
use liandan_tensor::{ConvGeometry, DType, Layout, Result, Storage, Strided};

use super::params::{WinogradInvocations, WinogradKernel, WinogradOutput, WinogradPatch};
use super::wgpu_buffer;
use crate::backend::{gpu_storage, WgpuBackend};
use crate::gpu::Gpu;
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::packed::{packed_view, with_words};
use crate::params::{words, Meta, ShaderParams};
use crate::plan::{products_cut, Frame, Pass, Tile, Winograd};
use crate::repr::Repr;

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
/// How the stages that read the pass's operands (`Input`, `Dy`, `Weight`) read them: as
/// stored, or packed bf16.
const READ_STORED: &str = include_str!("../shaders/conv/winograd/read_stored.wgsl");
const READ_PACKED: &str = include_str!("../shaders/conv/winograd/read_packed.wgsl");

/// One of the transforms (the products between them are the matmul's kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    stage: Stage,
    tile: Tile,
    /// The pass's operands and result (`t` in the shaders): f32, or f16 read and written as
    /// stored; the transformed intermediates (`x`) are f32 either way.
    dtype: DType,
    /// The stages that read the pass's operands (the patches', the kernels') read bf16 packed
    /// two to a word as stored: no widened copies beside the transforms.
    packed: bool,
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
        let w = w.ty("x", DType::F32).ty("t", self.dtype).flag("FLIP", flip);
        let w = match (self.stage, self.packed) {
            (Stage::Input | Stage::Dy | Stage::Weight { .. }, true) => with_words(w).part(READ_PACKED),
            (Stage::Input | Stage::Dy | Stage::Weight { .. }, false) => w.part(READ_STORED),
            _ => w,
        };
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
        let each = |tile, dtype| stages.map(|stage| Key { stage, tile, dtype, packed: false });
        let stored = [Tile::F2, Tile::F4].into_iter().flat_map(|tile| [DType::F32, DType::F16].into_iter().flat_map(move |dtype| each(tile, dtype)));
        let reads = [Stage::Input, Stage::Dy, Stage::Weight { flip: false }, Stage::Weight { flip: true }];
        let packed = [Tile::F2, Tile::F4].into_iter().flat_map(|tile| reads.map(|stage| Key { stage, tile, dtype: DType::F32, packed: true }));
        stored.chain(packed).collect()
    }
}

/// A stage's parameter block, as the dispatch takes it, and its invocations.
struct Block(Meta, u32);

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

/// Runs one stage of `tile` on a pass of `dtype` from `from` into `to`, its block's invocations;
/// `packed`: the stages that read the pass's operands read packed bf16.
fn run_stage(gpu: &Gpu, (tile, dtype, packed): (Tile, DType, bool), stage: Stage, meta: &Block, from: &wgpu::Buffer, to: &wgpu::Buffer) -> Result<()> {
    let packed = packed && matches!(stage, Stage::Input | Stage::Dy | Stage::Weight { .. });
    let kernel = gpu.kernel(Key { stage, tile, dtype, packed })?;
    gpu.dispatch(&kernel, &meta.0, &[from, to], grid(meta.1 as usize))
}

impl WgpuBackend {
    /// `pass` of `g` as Winograd (see the module docs), or `None` where an offset would pass
    /// 32 bits (`plan::conv` keeps the intermediates within 32 bits and one binding); `wide`:
    /// a weight gradient stored in f32 whatever its operands' type.
    pub(super) fn conv_winograd(&self, pass: Pass, g: &ConvGeometry, plan: Winograd, inputs: &[Strided], wide: bool) -> Option<Result<Vec<Storage>>> {
        let tile = plan.tile;
        let f = Frame::new(pass, g, tile);
        let Frame { m, k, ih, iw, pad, oh, ow, tw, tiles } = f;
        let nt = tile.products();
        let p = g.n * tiles;
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let limit = gpu.max_binding();
        if pass == Pass::Weight {
            return Some(self.winograd_weight(g, plan, inputs, &f, wide));
        }
        let (x, w) = (&inputs[0], &inputs[1]);
        // The products are `[T^2, m, k] x [T^2, k, p]`: the kernels' transform times the
        // patches'.
        let input_meta = patch_block(k, p, tiles, tw, (ih, iw), x.layout.offset(), pad)?;
        let kernel_meta = Block::of(&WinogradKernel { invocations: u(m * k)?, m: u(m)?, k: u(k)?, offset: u(w.layout.offset())? }, u(m * k)?);
        let output = WinogradOutput { invocations: u(m * p)?, patches: u(p)?, tiles: u(tiles)?, tiles_w: u(tw)?, h: u(oh)?, w: u(ow)?, channels: u(m)? };
        let output_meta = Block::of(&output, output.invocations);
        // Packed bf16 operands are read as stored; y is written in f32 words (packed after).
        let key = (tile, kernel_dtype(inputs), inputs.iter().all(packed_view));
        let stage = |stage: Stage, meta: &Block, from: &wgpu::Buffer, to: &wgpu::Buffer| run_stage(gpu, key, stage, meta, from, to);
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
            let y = self.output(out_dtype(inputs), g.n * m * oh * ow)?;
            stage(Stage::Output, &output_meta, wgpu_buffer(&product), y.buffer())?;
            Ok(vec![Arc::new(y) as Storage])
        })())
    }

    /// The weight gradient as Winograd, the images in the plan's chunks (each chunk's products
    /// summed into the first's), so that the intermediates of a large batch do not raise the
    /// step's peak by their whole size.
    fn winograd_weight(&self, g: &ConvGeometry, plan: Winograd, inputs: &[Strided], f: &Frame, wide: bool) -> Result<Vec<Storage>> {
        let &Frame { m, k, ih, iw, pad, oh, ow, tw, tiles } = f;
        let gpu = self.gpu()?;
        let (tile, images) = (plan.tile, plan.images.max(1));
        let nt = tile.products();
        let (dy, x) = (&inputs[0], &inputs[1]);
        let err = || gpu.err("conv2d (Winograd)", "a size past 32 bits");
        // Packed bf16 operands are read as stored (`fused_conv` hands them over unwidened).
        let key = (tile, kernel_dtype(inputs), inputs.iter().all(packed_view));
        let stage = |stage: Stage, meta: &Block, from: &wgpu::Buffer, to: &wgpu::Buffer| run_stage(gpu, key, stage, meta, from, to);
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
        let (dw, stored) = if wide { (DType::F32, DType::F32) } else { (out_dtype(inputs), kernel_dtype(inputs)) };
        let y = self.output(dw, 9 * m * k)?;
        let invocations = u(m * k).ok_or_else(err)?;
        let meta = Block::of(&WinogradInvocations { invocations }, invocations);
        run_stage(gpu, (tile, stored, false), Stage::WeightOut, &meta, wgpu_buffer(&sum), y.buffer())?;
        Ok(vec![Arc::new(y) as Storage])
    }
}

/// The type a Winograd pass labels its result: its operands' (f32 or f16), or bf16 where its
/// operands are widened bf16 (f32 words, as the kernels compute on): the result, f32 words
/// too, is then rounded as it is packed.
fn out_dtype(inputs: &[Strided]) -> DType {
    match inputs.first().map(|v| v.dtype) {
        Some(d @ (DType::BF16 | DType::F16)) => d,
        _ => DType::F32,
    }
}

/// The type the stages read the operands and write the result in: f16 as stored, else f32
/// words (widened bf16 among them).
fn kernel_dtype(inputs: &[Strided]) -> DType {
    match inputs.first().map(|v| v.dtype) {
        Some(DType::F16) => DType::F16,
        _ => DType::F32,
    }
}
