//! Convolution a few images at a time ([`Conv2d`], with its bias [`Conv2dBias`] added per
//! image while the image's output is in cache, and ReLU with it for [`Conv2dBiasRelu`], and its
//! two gradients, f32 and f64): a block of images' columns is built side by side in a buffer of
//! the thread's own and multiplied at once, so no batch-sized column buffer is ever allocated,
//! and the weight
//! gradient accumulates into one block per thread rather than one per image summed afterwards.
//! A block is one image when an image has columns enough for the gemm, more when the images
//! are small (resnet18's last stage has 16 columns an image: multiplied one image at a time,
//! the gemm repacked the 512 x 4608 weights, or added into the 512 x 4608 weight gradient, for
//! every 16 columns). Images run in parallel, each product on one thread, when there is an
//! image for every thread and each thread's images have columns enough; one after another,
//! each product threaded, otherwise. Halves are left to the composite, but for the weight
//! gradient summed into f32 ([`Conv2dBackwardWeightWide`]): the f32 kernel on widened operands.
//! The f32 forward and input gradient of a padded 3x3 layer of 64 channels and more run as
//! Winograd F(2x2, 3x3) instead ([`winograd::applies`]).
//!
//! Dimension letters as in `liandan_tensor`'s `conv_fused`: N batch, C channels, O output
//! channels, G groups, Cg = C/G, Og = O/G, K = Cg * kh * kw (a group's column rows),
//! L = out_h * out_w.

use liandan_tensor::backend::Window2d;
use liandan_tensor::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBackwardWeightWide, Conv2dBias, Conv2dBiasRelu};
use liandan_tensor::{ConvGeometry, CustomKernel, DType, Layout, Result, Strided};
use rayon::prelude::*;

use crate::fused::slices;
use crate::matmul::{product, transpose_into, Engine, Gemm, Operand};
use crate::storage::{self, alloc, alloc_overwritten, bad_dtype, cpu, scratch_overwritten, slice, CpuElement, CpuStorage, Held, Real, SharedMut};
use crate::strided::map1;
use crate::window::{col2im_add, col2im_images, im2col_images, im2col_into, Geo};
use crate::winograd;

/// The kernel for a convolution op, or `None` for halves (and every other op).
pub(crate) fn fused(op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<CpuStorage>> {
    let run = |f32_kernel: fn(&[Strided], ConvGeometry) -> Result<CpuStorage>, f64_kernel: fn(&[Strided], ConvGeometry) -> Result<CpuStorage>, g| {
        Some(match inputs.first()?.dtype {
            DType::F32 => f32_kernel(inputs, g),
            DType::F64 => f64_kernel(inputs, g),
            _ => return None,
        })
    };
    if let Some(&Conv2d(g)) = op.downcast_ref() {
        return run(forward_f32::<false>, forward::<f64, false>, g);
    }
    if let Some(&Conv2dBias(g)) = op.downcast_ref() {
        return run(forward_f32::<false>, forward::<f64, false>, g);
    }
    if let Some(&Conv2dBiasRelu(g)) = op.downcast_ref() {
        return run(forward_f32::<true>, forward::<f64, true>, g);
    }
    if let Some(&Conv2dBackwardInput(g)) = op.downcast_ref() {
        return run(backward_input_f32, backward_input::<f64>, g);
    }
    if let Some(&Conv2dBackwardWeightWide(g)) = op.downcast_ref() {
        return Some(backward_weight_wide(inputs, g));
    }
    let &Conv2dBackwardWeight(g) = op.downcast_ref()?;
    run(backward_weight::<f32>, backward_weight::<f64>, g)
}

/// `ops::Conv2dBackwardWeightWide`: f16 or bf16 `dy` and `x` widened to f32, then the f32
/// weight gradient (its sums never rounded to the halves).
fn backward_weight_wide(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    let mut wide: Vec<(CpuStorage, Layout)> = Vec::with_capacity(inputs.len());
    let mut held = Vec::with_capacity(inputs.len());
    for v in inputs {
        let data = match cpu(v.storage) {
            CpuStorage::F16(x) => map1(slice(x), v.layout, Real::widen)?,
            CpuStorage::BF16(x) => map1(slice(x), v.layout, Real::widen)?,
            other => return Err(bad_dtype("conv2d_backward_weight_wide", other.dtype(), "f16 or bf16 operands")),
        };
        let layout = Layout::contiguous(v.layout.shape());
        // Counted while the copies are held, so the peak sees them beside the kernel's own.
        held.push(Held::new(data.len() * 4));
        wide.push((CpuStorage::F32(data.into()), layout));
    }
    let views: Vec<Strided> = wide.iter().map(|(s, layout)| Strided { storage: s, layout, dtype: DType::F32 }).collect();
    backward_weight::<f32>(&views, g)
}

/// The element types with a gemm: f32 and f64.
trait Elem: Real<Acc = Self> + Gemm + CpuElement {}
impl<T: Real<Acc = T> + Gemm + CpuElement> Elem for T {}

/// Columns a product gets at least, by putting small images side by side in one block.
const MIN_COLS: usize = 512;

/// The sizes one image's work needs, and the geometry of one group's planes.
#[derive(Clone, Copy)]
struct Plan {
    geo: Geo,
    g: ConvGeometry,
    /// Cg, Og, K, L.
    cg: usize,
    og: usize,
    k: usize,
    l: usize,
    /// Images per thread, threads, and images per block (NB).
    per: usize,
    threads: usize,
    nb: usize,
    /// Whether images run in parallel, each product on one thread ([`per_image_threads`]).
    parallel_images: bool,
}

impl Plan {
    /// The plan of a pass whose images run in parallel from `min_cols` columns a thread
    /// ([`per_image_threads`]).
    fn new(op: &'static str, g: ConvGeometry, min_cols: usize) -> Result<Plan> {
        let (cg, og) = (g.c / g.groups, g.o / g.groups);
        let w = Window2d { n: 1, c: cg, h: g.h, w: g.w, kernel: g.kernel, stride: g.stride, padding: g.padding, dilation: g.dilation };
        let geo = Geo::new(op, &w)?;
        let l = geo.l();
        // The batch cut into one run of images per thread when images run in parallel, one
        // run otherwise.
        let parallel_images = per_image_threads(g.n, l, min_cols);
        let (per, threads) = if parallel_images {
            let per = g.n.div_ceil(rayon::current_num_threads());
            (per, g.n.div_ceil(per))
        } else {
            (g.n.max(1), 1)
        };
        let nb = MIN_COLS.div_ceil(l.max(1)).clamp(1, per);
        Ok(Plan { geo, g, cg, og, k: cg * geo.taps(), l, per, threads, nb, parallel_images })
    }

    /// Elements of one image of the input, of the output.
    fn image_in(&self) -> usize {
        self.g.c * self.geo.hw()
    }

    fn image_out(&self) -> usize {
        self.g.o * self.l
    }

    /// A thread's buffers: the columns of a block of images (none when one image's columns
    /// are its input, a 1x1, stride-1 convolution), and an `[Og, NB L]` block of outputs or
    /// output gradients gathered from (or for) the images' own `[O, L]` planes.
    fn scratch<T: Elem>(&self, op: &'static str) -> Result<Scratch<T>> {
        let cols = if self.geo.is_identity() && self.nb == 1 { 0 } else { self.k * self.nb * self.l };
        let packed = if self.nb == 1 { 0 } else { self.og * self.nb * self.l };
        // Both are written before they are read: the columns whole (the padding's zeros too),
        // the block by its product or gathered from the images' planes.
        Ok(Scratch { cols: scratch_overwritten(op, cols, T::zero())?, packed: scratch_overwritten(op, packed, T::zero())? })
    }

    /// The engine and threading of one product: images run in parallel take `gemm` one
    /// thread each (`matrixmultiply` called from rayon's workers ran 4x slower than the
    /// composite), the rest the engine of `LIANDAN_CPU_GEMM`, threaded.
    fn engine(&self) -> Result<(Engine, bool)> {
        if self.parallel_images {
            Ok((Engine::Gemm, false))
        } else {
            Ok((crate::matmul::engine()?, true))
        }
    }

    /// Whether a block's own loops (its columns, their folding back, the gathering of its
    /// planes) run on every thread: in the blocks multiplied on every thread, one after
    /// another, which would otherwise leave all threads but one idle during them (resnet18's
    /// last stage at batch 16: 16 images of 16 columns, 2,304 or 4,608 rows of runs of 4).
    fn spread(&self) -> bool {
        !self.parallel_images && rayon::current_num_threads() > 1
    }

    /// The `(image, block)` offsets of the `L`-long runs that carry group `grp`'s `[Og, L]`
    /// planes of `nb` whole `[O, L]` images to an `[Og, nb L]` block and back.
    fn runs(&self, grp: usize, nb: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..nb).flat_map(move |i| (0..self.og).map(move |o| (i * self.image_out() + (grp * self.og + o) * self.l, (o * nb + i) * self.l)))
    }

    /// Group `grp`'s `[Og, nb L]` block of the `nb` images of `ys`, in `packed`.
    fn pack<'a, T: Copy + Send + Sync>(&self, ys: &[T], grp: usize, nb: usize, packed: &'a mut [T]) -> &'a [T] {
        let (l, block) = (self.l, &mut packed[..self.og * nb * self.l]);
        if self.spread() {
            // Row o of the block: output o of each image in turn.
            block.par_chunks_mut(nb * l).enumerate().for_each(|(o, row)| {
                for (i, run) in row.chunks_mut(l).enumerate() {
                    run.copy_from_slice(&ys[i * self.image_out() + (grp * self.og + o) * l..][..l]);
                }
            });
        } else {
            self.runs(grp, nb).for_each(|(at, to)| block[to..to + l].copy_from_slice(&ys[at..at + l]));
        }
        block
    }

    /// The inverse of [`Plan::pack`]: the block's runs back into the images' planes.
    fn unpack<T: Copy + Send + Sync>(&self, packed: &[T], grp: usize, nb: usize, ys: &mut [T]) {
        let l = self.l;
        if self.spread() {
            ys[..nb * self.image_out()].par_chunks_mut(self.image_out()).enumerate().for_each(|(i, image)| {
                for o in 0..self.og {
                    image[(grp * self.og + o) * l..][..l].copy_from_slice(&packed[(o * nb + i) * l..][..l]);
                }
            });
        } else {
            self.runs(grp, nb).for_each(|(at, from)| ys[at..at + l].copy_from_slice(&packed[from..from + l]));
        }
    }

    /// Group `grp`'s columns of the `nb` images of `xs` (whole images), side by side in `cols`
    /// as `[K, nb L]`; the input itself when that is one image's columns already.
    fn columns<'a, T: Real>(&self, xs: &'a [T], grp: usize, nb: usize, cols: &'a mut [T]) -> &'a [T] {
        let plane = |i: usize| &xs[i * self.image_in() + grp * self.cg * self.geo.hw()..][..self.cg * self.geo.hw()];
        if self.geo.is_identity() && nb == 1 {
            return plane(0);
        }
        if self.spread() {
            im2col_images(xs, |i| i * self.image_in() + grp * self.cg * self.geo.hw(), nb, &self.geo, cols);
            return cols;
        }
        for i in 0..nb {
            im2col_into(plane(i), &self.geo, &mut cols[i * self.l..], nb * self.l);
        }
        cols
    }
}

/// Columns a thread's run of images needs for the images to run in parallel, in a forward or
/// input-gradient pass ([`per_image_threads`]).
const PARALLEL_COLS: usize = 64;

/// Whether images run in parallel (each product on one thread): when there is an image for
/// every thread and each thread's run of images has `min_cols` columns or more. Smaller
/// images go into blocks multiplied on every thread instead. Measured on 16 threads of a Xeon
/// at batch 16: resnet18's last stage (16 columns an
/// image) took its input gradient 2.4x faster in one block than image by image, its layer3 (64
/// columns) its forward 2.2x slower. A weight gradient takes [`MIN_COLS`]: images in
/// parallel each add into a weight-sized block of their thread's, summed at the end (16 blocks
/// of 512 x 4,608 for that last stage, 26x slower than one block threaded).
fn per_image_threads(n: usize, l: usize, min_cols: usize) -> bool {
    let threads = rayon::current_num_threads();
    n > 1 && n >= threads && n.div_ceil(threads) * l >= min_cols
}

/// A thread's buffers ([`Plan::scratch`]).
struct Scratch<T: Send + 'static> {
    cols: storage::Scratch<T>,
    packed: storage::Scratch<T>,
}

/// A row-major `[rows, cols]` operand, or its transpose when `transposed`.
fn mat<T>(data: &[T], cols: usize, transposed: bool) -> Operand<'_, T> {
    Operand { data, strides: if transposed { [1, cols] } else { [cols, 1] } }
}

/// `y[n] = W cols(x[n])` per group, for a block of images at once; with `RELU`, `max(y + b,
/// 0)` (NaN to 0) as the bias is added.
fn forward<T: Elem, const RELU: bool>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    let p = Plan::new("conv2d", g, PARALLEL_COLS)?;
    let v = slices::<T>("conv2d", inputs)?;
    let (x, w, bias) = (&*v[0], &*v[1], v.get(2));
    // Written whole by the products (or unpacked from their blocks).
    let mut y = alloc_overwritten("conv2d", g.n * p.image_out(), T::zero())?;
    // Counted while the columns are (it becomes a storage, counted, once written).
    let _y = Held::new(y.len() * std::mem::size_of::<T>());
    let (engine, threaded) = p.engine()?;
    let block = |s: &mut Scratch<T>, n0: usize, nb: usize, y: &mut [T]| {
        let x = &x[n0 * p.image_in()..][..nb * p.image_in()];
        for grp in 0..g.groups {
            let cols = p.columns(x, grp, nb, &mut s.cols);
            let w = &w[grp * p.og * p.k..][..p.og * p.k];
            if nb == 1 {
                let y = &mut y[grp * p.og * p.l..][..p.og * p.l];
                product(engine, threaded, false, [p.og, p.k, p.l], mat(w, p.k, false), mat(cols, p.l, false), y);
            } else {
                let packed = &mut s.packed[..p.og * nb * p.l];
                product(engine, threaded, false, [p.og, p.k, nb * p.l], mat(w, p.k, false), mat(cols, nb * p.l, false), packed);
                p.unpack(packed, grp, nb, y);
            }
        }
        // The bias on each channel's plane, while the block's outputs are in cache.
        if let Some(b) = bias {
            for (i, plane) in y[..nb * p.image_out()].chunks_mut(p.l.max(1)).enumerate() {
                add_bias::<T, RELU>(plane, b[i % g.o]);
            }
        }
    };
    each_block(&p, "conv2d", &mut y, p.image_out(), block)?;
    Ok(T::wrap(y.into()))
}

/// `plane += bo`, then with `RELU` `max(plane, 0)` (NaN to 0).
fn add_bias<T: Real, const RELU: bool>(plane: &mut [T], bo: T) {
    match RELU {
        true => plane.iter_mut().for_each(|e| *e = if *e + bo > T::zero() { *e + bo } else { T::zero() }),
        false => plane.iter_mut().for_each(|e| *e = *e + bo),
    }
}

/// The f32 forward: Winograd where it applies and the operands are finite, im2col otherwise.
fn forward_f32<const RELU: bool>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    if winograd::applies(&g) {
        let v = slices::<f32>("conv2d", inputs)?;
        let bias = v.get(2);
        let epilogue = |o: usize, plane: &mut [f32]| {
            if let Some(b) = bias {
                add_bias::<f32, RELU>(plane, b[o]);
            }
        };
        if let Some(y) = winograd::forward(&v[0], &v[1], g, epilogue)? {
            return Ok(y);
        }
    }
    forward::<f32, RELU>(inputs, g)
}

/// The f32 input gradient, as [`forward_f32`].
fn backward_input_f32(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    if winograd::applies(&g) {
        let v = slices::<f32>("conv2d_backward_input", inputs)?;
        if let Some(dx) = winograd::backward_input(&v[0], &v[1], g)? {
            return Ok(dx);
        }
    }
    backward_input::<f32>(inputs, g)
}

/// `dx[n] = col2im(W^T dy[n])` per group, for a block of images at once.
fn backward_input<T: Elem>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    const OP: &str = "conv2d_backward_input";
    let p = Plan::new(OP, g, PARALLEL_COLS)?;
    let v = slices::<T>(OP, inputs)?;
    let (dy, w) = (&*v[0], &*v[1]);
    let mut dx = alloc(OP, g.n * p.image_in(), T::zero())?;
    let _dx = Held::new(dx.len() * std::mem::size_of::<T>());
    let (engine, threaded) = p.engine()?;
    let block = |s: &mut Scratch<T>, n0: usize, nb: usize, dx: &mut [T]| {
        let dy = &dy[n0 * p.image_out()..][..nb * p.image_out()];
        let ld = nb * p.l;
        for grp in 0..g.groups {
            let w = &w[grp * p.og * p.k..][..p.og * p.k];
            let plane = |i: usize| i * p.image_in() + grp * p.cg * p.geo.hw();
            let dy_g = if nb == 1 { &dy[grp * p.og * p.l..][..p.og * p.l] } else { p.pack(dy, grp, nb, &mut s.packed) };
            if p.geo.is_identity() && nb == 1 {
                product(engine, threaded, false, [p.k, p.og, p.l], mat(w, p.k, true), mat(dy_g, p.l, false), &mut dx[plane(0)..][..p.cg * p.geo.hw()]);
            } else if p.spread() {
                product(engine, threaded, false, [p.k, p.og, ld], mat(w, p.k, true), mat(dy_g, ld, false), &mut s.cols);
                col2im_images(&s.cols, nb, &p.geo, dx, p.image_in(), grp * p.cg);
            } else {
                // A run of input channels at a time, so their columns are folded back while
                // they are in cache.
                let (taps, hw) = (p.geo.taps(), p.geo.hw());
                let run = (FOLD_BYTES / (taps * ld * std::mem::size_of::<T>()).max(1)).clamp(1, p.cg);
                for c0 in (0..p.cg).step_by(run) {
                    let planes = run.min(p.cg - c0);
                    let cols = &mut s.cols[..planes * taps * ld];
                    product(engine, threaded, false, [planes * taps, p.og, ld], mat(&w[c0 * taps..], p.k, true), mat(dy_g, ld, false), cols);
                    for i in 0..nb {
                        col2im_add(&cols[i * p.l..], &p.geo, &mut dx[plane(i) + c0 * hw..][..planes * hw], ld);
                    }
                }
            }
        }
    };
    each_block(&p, OP, &mut dx, p.image_in(), block)?;
    Ok(T::wrap(dx.into()))
}

/// Bytes of columns an input gradient makes at a time before folding them back (a core's L2
/// holds them).
const FOLD_BYTES: usize = 512 << 10;

/// Output channels a group has at most for its weight gradient to be summed transposed.
const TRANSPOSED_DW_MAX_OUT: usize = 256;

/// `dW = sum_n dy[n] cols(x[n])^T` per group: each thread adds its blocks of images into its
/// own `dW`, and those few are summed at the end. With few output channels a group, and at
/// least as many weights a channel, the sums are of `dW^T = cols dy^T`, transposed once at
/// the end: on an Intel Xeon `gemm` ran these 1.2-1.9x faster than `dy cols^T` (`[64, 1024] x
/// [1024, 576]` 0.90 ms a thread, its transpose 0.49; `[256, 512] x [512, 2304]` 4.4 against
/// 3.6); at 512 channels only 1.1x, less than the transpose of the result costs, and with 9
/// weights a channel (one input channel) 1.25x slower.
fn backward_weight<T: Elem>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    const OP: &str = "conv2d_backward_weight";
    let p = Plan::new(OP, g, MIN_COLS)?;
    let v = slices::<T>(OP, inputs)?;
    let (dy, x) = (&*v[0], &*v[1]);
    let size = g.o * p.k;
    let (engine, threaded) = p.engine()?;
    let transposed = p.og <= TRANSPOSED_DW_MAX_OUT && p.k >= p.og && size > 0;
    // Adds the share of images `n0..n0 + nb` into `dw` (its groups each `[K, Og]` when
    // `transposed`, else `[Og, K]`), or writes it there for a thread's first block.
    let block = |s: &mut Scratch<T>, n0: usize, nb: usize, dw: &mut [T], accumulate: bool| {
        let x = &x[n0 * p.image_in()..][..nb * p.image_in()];
        let dy = &dy[n0 * p.image_out()..][..nb * p.image_out()];
        let ld = nb * p.l;
        for grp in 0..g.groups {
            let cols = p.columns(x, grp, nb, &mut s.cols);
            let dw = &mut dw[grp * p.og * p.k..][..p.og * p.k];
            let dy_g = if nb == 1 { &dy[grp * p.og * p.l..][..p.og * p.l] } else { p.pack(dy, grp, nb, &mut s.packed) };
            if transposed {
                product(engine, threaded, accumulate, [p.k, ld, p.og], mat(cols, ld, false), mat(dy_g, ld, true), dw);
            } else {
                product(engine, threaded, accumulate, [p.og, ld, p.k], mat(dy_g, ld, false), mat(cols, ld, true), dw);
            }
        }
    };
    // Each thread's first block writes its part whole (every group's), so the parts are not
    // zeroed first: that, and reading the zeros back, cost a pass over a weight-sized block.
    let mut parts = (0..p.threads).map(|_| Ok((scratch_overwritten(OP, size, T::zero())?, p.scratch::<T>(OP)?))).collect::<Result<Vec<_>>>()?;
    let run = |t: usize, (dw, s): &mut (storage::Scratch<T>, Scratch<T>)| {
        let images = t * p.per..g.n.min((t + 1) * p.per);
        if images.is_empty() {
            dw.fill(T::zero());
        }
        images.clone().step_by(p.nb).enumerate().for_each(|(b, n0)| block(s, n0, p.nb.min(images.end - n0), dw, b > 0));
    };
    if p.threads > 1 {
        parts.par_iter_mut().enumerate().for_each(|(t, part)| run(t, part));
    } else {
        parts.iter_mut().enumerate().for_each(|(t, part)| run(t, part));
    }
    let mut parts = parts.into_iter().map(|(dw, _)| dw);
    let mut dw = parts.next().map_or_else(|| alloc(OP, size, T::zero()), |dw| Ok(dw.into_vec()))?;
    let rest: Vec<_> = parts.collect();
    if !rest.is_empty() {
        // The threads' blocks summed on every thread, each a share of the elements (in the
        // same order, so the result does not depend on how the elements are shared out).
        const SHARE: usize = 1 << 14;
        dw.par_chunks_mut(SHARE).enumerate().for_each(|(c, out)| {
            for part in &rest {
                out.iter_mut().zip(&part[c * SHARE..]).for_each(|(a, &b)| *a += b);
            }
        });
    }
    if !transposed {
        return Ok(T::wrap(dw.into()));
    }
    // Each group's `[K, Og]` into `[Og, K]`, a run of K's rows a thread at a time.
    const RUN: usize = 256;
    let mut out = alloc_overwritten(OP, size, T::zero())?;
    for (src, dst) in dw.chunks(p.og * p.k).zip(out.chunks_mut(p.og * p.k)) {
        let dst = SharedMut::new(dst);
        src.par_chunks(RUN * p.og).enumerate().for_each(|(r, rows)| {
            // SAFETY: rows `r * RUN..` of the group's `[K, Og]` land in columns `r * RUN..` of
            // its `[Og, K]` block, which no other run writes; `out` outlives the loop.
            unsafe { transpose_into(rows, [rows.len() / p.og, p.og], dst.get().add(r * RUN), p.k, false) };
        });
    }
    Ok(T::wrap(out.into()))
}

/// Runs `block(scratch, n0, nb, out[n0..n0 + nb])` over blocks of images of `out` (`chunk`
/// elements an image), with buffers per thread: threads' runs of images in parallel or one
/// after another, as the plan says.
fn each_block<T: Elem>(p: &Plan, op: &'static str, out: &mut [T], chunk: usize, block: impl Fn(&mut Scratch<T>, usize, usize, &mut [T]) + Sync) -> Result<()> {
    if chunk == 0 {
        return Ok(());
    }
    let mut bufs = (0..p.threads).map(|_| p.scratch::<T>(op)).collect::<Result<Vec<_>>>()?;
    let run = |t: usize, out: &mut [T], s: &mut Scratch<T>| {
        out.chunks_mut(p.nb * chunk).enumerate().for_each(|(b, out)| block(s, t * p.per + b * p.nb, out.len() / chunk, out))
    };
    if p.threads > 1 {
        out.par_chunks_mut(p.per * chunk).zip(bufs.par_iter_mut()).enumerate().for_each(|(t, (out, s))| run(t, out, s));
    } else {
        run(0, out, &mut bufs[0]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use liandan_tensor::ops::{Conv2dBackwardInput, Conv2dBackwardWeight};
    use liandan_tensor::{ConvGeometry, DType};

    use crate::winograd::tests::{close, run, seeded, values};

    /// `(dx, dw)` of a convolution by their definitions, in f64: each output gradient element
    /// times the input element and the weight its tap meets.
    fn gradients(x: &[f64], w: &[f64], dy: &[f64], g: ConvGeometry) -> (Vec<f64>, Vec<f64>) {
        let (k, s, p) = (g.kernel.0, g.stride.0, g.padding.0);
        let (oh, ow) = ((g.h + 2 * p - k) / s + 1, (g.w + 2 * p - k) / s + 1);
        let (mut dx, mut dw) = (vec![0.0; x.len()], vec![0.0; w.len()]);
        for (n, o, yo, xo) in (0..g.n).flat_map(|n| (0..g.o).flat_map(move |o| (0..oh).flat_map(move |a| (0..ow).map(move |b| (n, o, a, b))))) {
            let d = dy[((n * g.o + o) * oh + yo) * ow + xo];
            for (c, i, j) in (0..g.c).flat_map(|c| (0..k).flat_map(move |i| (0..k).map(move |j| (c, i, j)))) {
                let (yi, xi) = ((yo * s + i).wrapping_sub(p), (xo * s + j).wrapping_sub(p));
                if yi < g.h && xi < g.w {
                    let (at, wt) = (((n * g.c + c) * g.h + yi) * g.w + xi, ((o * g.c + c) * k + i) * k + j);
                    dx[at] += d * w[wt];
                    dw[wt] += d * x[at];
                }
            }
        }
        (dx, dw)
    }

    /// Input gradients folded back a run of channels at a time (64 input channels of 9 taps
    /// over 256 or 64 columns: more columns than one run holds), and weight gradients summed
    /// transposed (`cols dy^T`, whose rhs the products copy row-major), one image or several to
    /// a block; off Winograd (32 output channels, or stride 2).
    #[test]
    fn input_and_weight_gradients_match_their_definitions() {
        for (n, c, o, hw, stride) in [(2, 64, 32, 16, 1), (3, 64, 32, 8, 1), (4, 64, 48, 16, 2), (5, 24, 16, 6, 1)] {
            let g = ConvGeometry { n, c, h: hw, w: hw, o, groups: 1, kernel: (3, 3), stride: (stride, stride), padding: (1, 1), dilation: (1, 1) };
            let ohw = (hw + 2 - 3) / stride + 1;
            let (x, w, dy) = (seeded(n * c * hw * hw, 1), seeded(o * c * 9, 2), seeded(n * o * ohw * ohw, 3));
            let (want_dx, want_dw) = gradients(&x, &w, &dy, g);
            let (xs, ws, ys) = ([n, c, hw, hw], [o, c, 3, 3], [n, o, ohw, ohw]);
            for dtype in [DType::F32, DType::F64] {
                let dx = run(&[(&ys, &dy), (&ws, &w)], dtype, |v| super::fused(&Conv2dBackwardInput(g), v)).unwrap().unwrap();
                close(&format!("input gradient {g:?} {dtype:?}"), &values(&dx), &want_dx, 1e-4);
                let dw = run(&[(&ys, &dy), (&xs, &x)], dtype, |v| super::fused(&Conv2dBackwardWeight(g), v)).unwrap().unwrap();
                close(&format!("weight gradient {g:?} {dtype:?}"), &values(&dw), &want_dw, 1e-4);
            }
        }
    }
}
