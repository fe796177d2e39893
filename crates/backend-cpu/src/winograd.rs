//! Winograd F(2x2, 3x3) for the f32 stride-1 3x3 convolutions (one group, no dilation) and
//! their input gradients (a stride-1 3x3 convolution too, of the output gradient with the
//! flipped, transposed weights). Each 4x4 input tile and each 3x3 filter are transformed, 16
//! products of `[O, C] x [C, tiles]` replace the im2col product, and each 2x2 output tile is
//! transformed back: 16 multiply-adds a tile where im2col takes 36. Weight gradients stay on
//! im2col: summed over the batch's tiles as Winograd, they came 3e-4 off the exact sums on
//! values near 1 (1,200 products), past the 1e-4 the conformance suite holds im2col's to.
//!
//! An infinity or NaN in a tile would spread over all four of the tile's outputs (and turn
//! inf into NaN through `inf - inf`), where the direct convolution keeps it to the outputs
//! whose window holds it. The CPU is the reference the GPU's results are checked against, so a
//! convolution whose input or weights hold one returns `None` here and runs on im2col.
//!
//! Dimension letters as in `conv.rs`; P the tiles of a block (a run of tile rows), X = 16 the
//! positions of a transformed tile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use liandan_tensor::{ConvGeometry, Result};
use rayon::prelude::*;

use crate::matmul::{product_strided, Engine, Operand};
use crate::storage::{alloc_overwritten, scratch_overwritten, CpuStorage, Held, Scratch, SharedMut};
use crate::vmath::{deinterleave, non_finite_bit, winograd_input_tiles, winograd_output_tiles};

/// Positions of a transformed tile (4x4).
const X: usize = 16;

/// Channels a convolution needs on both sides. With fewer, the products are too thin for
/// the transforms to pay: mnist_cnn's 32-to-64 layer ran its forward 1.2x and its input
/// gradient 1.6-1.8x slower than on im2col.
const MIN_CHANNELS: usize = 64;

/// Tiles the whole batch needs: with fewer, transforming the filters (16 values for each 9
/// weights) costs what the products save (resnet18's last stage, 512 channels of 4 tiles an
/// image, ran level with im2col at batch 16 and 25-30% faster at 64).
const MIN_BATCH_TILES: usize = 128;

/// Whether a convolution with this geometry runs here (its forward and input gradient): 3x3,
/// stride 1, padded by 1 on each side (so the input gradient is too), no dilation, one group,
/// [`MIN_CHANNELS`] in and out, and [`MIN_BATCH_TILES`]. The kernels take paddings up to 2,
/// but unpadded layers ran slower than on im2col (seed003_cnn's 64-to-512 on 13 x 13 images:
/// its forward 1.2-1.7x, its input gradient 1.7-1.9x), for a reason not found.
pub(crate) fn applies(g: &ConvGeometry) -> bool {
    let shaped = g.kernel == (3, 3) && g.stride == (1, 1) && g.padding == (1, 1) && g.dilation == (1, 1) && g.groups == 1;
    shaped && g.c.min(g.o) >= MIN_CHANNELS && g.n.saturating_mul(g.h.div_ceil(2) * g.w.div_ceil(2)) >= MIN_BATCH_TILES
}

/// `y = conv(x, w)` for `x` `[N, C, H, W]` and `w` `[O, C, 3, 3]`, `epilogue(o, plane)` on
/// each output plane as it is written (a bias, a ReLU), or `None` when `x` or `w` holds an
/// infinity or NaN.
pub(crate) fn forward(x: &[f32], w: &[f32], g: ConvGeometry, epilogue: impl Fn(usize, &mut [f32]) + Sync) -> Result<Option<CpuStorage>> {
    const OP: &str = "conv2d";
    let s = Shape::new(g.n, g.c, g.o, (g.h, g.w), g.padding);
    let Some(u) = filters(OP, g.o, g.c, |o, c| tap(w, g.c, o, c))? else { return Ok(None) };
    let mut y = alloc_overwritten(OP, g.n * s.image_out(), 0.0)?;
    let _y = Held::new(y.len() * 4);
    Ok(convolve(OP, s, x, &u, &mut y, epilogue)?.then(|| CpuStorage::F32(y.into())))
}

/// `dx = conv(dy, flip(w)^T)` with padding `2 - p`, the input gradient of [`forward`] for
/// `dy` `[N, O, OH, OW]`, or `None` when `dy` or `w` holds an infinity or NaN.
pub(crate) fn backward_input(dy: &[f32], w: &[f32], g: ConvGeometry) -> Result<Option<CpuStorage>> {
    const OP: &str = "conv2d_backward_input";
    let (oh, ow) = (g.h + 2 * g.padding.0 - 2, g.w + 2 * g.padding.1 - 2);
    let s = Shape::new(g.n, g.o, g.c, (oh, ow), (2 - g.padding.0, 2 - g.padding.1));
    debug_assert_eq!((s.oh, s.ow), (g.h, g.w));
    // From channel o of dy to channel c of dx: w[o, c] turned by 180 degrees.
    let Some(u) = filters(OP, g.c, g.o, |c, o| {
        let f = tap(w, g.c, o, c);
        std::array::from_fn(|k| f[8 - k])
    })?
    else {
        return Ok(None);
    };
    let mut dx = alloc_overwritten(OP, g.n * s.image_out(), 0.0)?;
    let _dx = Held::new(dx.len() * 4);
    Ok(convolve(OP, s, dy, &u, &mut dx, |_, _| {})?.then(|| CpuStorage::F32(dx.into())))
}

/// One Winograd convolution: `[N, Cin, H, W]` in, padded by `pad`, `[N, Cout, OH, OW]` out.
#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    pad: (usize, usize),
    oh: usize,
    ow: usize,
}

impl Shape {
    fn new(n: usize, cin: usize, cout: usize, (h, w): (usize, usize), pad: (usize, usize)) -> Shape {
        Shape { n, cin, cout, h, w, pad, oh: h + 2 * pad.0 - 2, ow: w + 2 * pad.1 - 2 }
    }

    /// Tile rows and columns of one image.
    fn tiles(&self) -> (usize, usize) {
        (self.oh.div_ceil(2), self.ow.div_ceil(2))
    }

    fn image_in(&self) -> usize {
        self.cin * self.h * self.w
    }

    fn image_out(&self) -> usize {
        self.cout * self.oh * self.ow
    }
}

/// `G g G^T` of one 3x3 filter `g` (rows of 3), as 16 values.
fn filter(g: [f32; 9]) -> [f32; X] {
    // t = G g, 4 rows of 3.
    let mut t = [0.0; 12];
    for j in 0..3 {
        let (a, b, c) = (g[j], g[3 + j], g[6 + j]);
        t[j] = a;
        t[3 + j] = (a + b + c) * 0.5;
        t[6 + j] = (a - b + c) * 0.5;
        t[9 + j] = c;
    }
    let mut u = [0.0; X];
    for r in 0..4 {
        let (a, b, c) = (t[3 * r], t[3 * r + 1], t[3 * r + 2]);
        u[4 * r] = a;
        u[4 * r + 1] = (a + b + c) * 0.5;
        u[4 * r + 2] = (a - b + c) * 0.5;
        u[4 * r + 3] = c;
    }
    u
}

/// The transformed filters `[Cout, X, Cin]` (an output channel's together, so they are made
/// in parallel) from the 3x3 filters `at(co, ci)` from input channel `ci` to output channel
/// `co`, or `None` when a weight is an infinity or NaN.
fn filters(op: &'static str, cout: usize, cin: usize, at: impl Fn(usize, usize) -> [f32; 9] + Sync) -> Result<Option<Scratch<f32>>> {
    let mut u = scratch_overwritten(op, cout * X * cin, 0.0)?;
    let finite = u.par_chunks_mut(X * cin).enumerate().all(|(co, row)| {
        let mut flags = 0;
        for ci in 0..cin {
            let f = at(co, ci);
            flags |= f.iter().fold(0, |a, &v| a | non_finite_bit(v));
            for (x, v) in filter(f).into_iter().enumerate() {
                row[x * cin + ci] = v;
            }
        }
        flags == 0
    });
    Ok(finite.then_some(u))
}

/// The 3x3 filter of `w` (`[O, C, 3, 3]`) from input channel `c` to output channel `o`.
fn tap(w: &[f32], c_all: usize, o: usize, c: usize) -> [f32; 9] {
    std::array::from_fn(|k| w[(o * c_all + c) * 9 + k])
}

/// Bytes a block's transformed tiles and their products take at most ([`convolve`]): a
/// block runs its transforms and 16 products from one core's L2. Blocks of 1,024 tiles over
/// the whole batch, each stage split over the threads, ran the stages from memory: on an AMD
/// EPYC, resnet18's layer1 spent 2.8 ms a forward transforming its input and 5.7 in products
/// that took 3.2 when run a second time.
const BLOCK_BYTES: usize = 1 << 20;

/// Tiles a block gets at least, so each of its 16 products has columns enough.
const MIN_BLOCK_TILES: usize = 64;

/// A thread's buffers: V `[Cin, X, pp]` (a channel's 16 transformed rows together), M `[X,
/// mb]` (each position's `[Cout, pp]` product one block), a split plane's rows and an edge's
/// output rows ([`convolve`]).
struct Bufs {
    v: Scratch<f32>,
    m: Scratch<f32>,
    even: Vec<f32>,
    odd: Vec<f32>,
    edge: Vec<f32>,
}

/// How a convolution's tile rows (`n th` of them, image by image) are cut into blocks.
#[derive(Clone, Copy)]
struct Blocks {
    rows: usize,
    block_rows: usize,
    /// The length of a position's row of tiles, and of a position's block of products:
    /// padded past the multiples of 4 KiB that would put the 16 rows a transform reads or
    /// writes together in the same cache sets.
    pp: usize,
    mb: usize,
}

impl Blocks {
    fn new(s: &Shape, threads: usize) -> Blocks {
        let (th, tw) = s.tiles();
        let rows = s.n * th;
        let row_bytes = (s.cin + s.cout) * X * tw * std::mem::size_of::<f32>();
        let fit = (BLOCK_BYTES / row_bytes.max(1)).max(MIN_BLOCK_TILES.div_ceil(tw.max(1))).max(1);
        // A whole number of blocks for every thread, where the rows allow.
        let blocks = rows.div_ceil(fit).div_ceil(threads) * threads;
        let block_rows = rows.div_ceil(blocks.clamp(1, rows.max(1))).max(1);
        let pp = block_rows * tw + 16;
        Blocks { rows, block_rows, pp, mb: s.cout * pp + 16 }
    }

    fn count(&self) -> usize {
        self.rows.div_ceil(self.block_rows)
    }

    /// Tiles of block `k`.
    fn tiles(&self, k: usize, tw: usize) -> usize {
        (((k + 1) * self.block_rows).min(self.rows) - k * self.block_rows) * tw
    }

    /// Block `k`'s runs of tile rows within one image: `(image, ty0..ty1, its first tile in
    /// the block)`.
    fn segments(&self, th: usize, tw: usize, k: usize) -> impl Iterator<Item = (usize, std::ops::Range<usize>, usize)> {
        let (r0, r1) = (k * self.block_rows, ((k + 1) * self.block_rows).min(self.rows));
        let mut r = r0;
        std::iter::from_fn(move || {
            (r < r1).then(|| {
                let (image, ty0) = (r / th, r % th);
                let ty1 = th.min(ty0 + r1 - r);
                let at = (r - r0) * tw;
                r += ty1 - ty0;
                (image, ty0..ty1, at)
            })
        })
    }
}

/// The convolution of `x` with the transformed filters `u` (`[Cout, X, Cin]`) into `y`, a
/// block of tile rows at a time, each block's transforms and products on one thread;
/// `epilogue(co, rows)` runs on each run of an output plane's rows once it is written.
/// `false` (and `y` part written) when `x` holds an infinity or NaN.
fn convolve(op: &'static str, s: Shape, x: &[f32], u: &[f32], y: &mut [f32], epilogue: impl Fn(usize, &mut [f32]) + Sync) -> Result<bool> {
    let (th, tw) = s.tiles();
    if th * tw == 0 || s.n == 0 || s.image_out() == 0 {
        return Ok(true);
    }
    let threads = rayon::current_num_threads().max(1);
    let cut = Blocks::new(&s, threads);
    let (split_rows, half) = (2 * cut.block_rows.min(th) + 2, tw + 1);
    let workers = threads.min(cut.count());
    let mut bufs = (0..workers)
        .map(|_| {
            Ok(Bufs {
                v: scratch_overwritten(op, s.cin * X * cut.pp, 0.0)?,
                m: scratch_overwritten(op, X * cut.mb, 0.0)?,
                even: vec![0.0; split_rows * half],
                odd: vec![0.0; split_rows * half],
                edge: vec![0.0; 4 * tw],
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let (next, finite) = (AtomicUsize::new(0), AtomicBool::new(true));
    let out = SharedMut::new(y);
    let work = |b: &mut Bufs| loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= cut.count() || !finite.load(Ordering::Relaxed) {
            break;
        }
        if !block(&s, &cut, k, x, u, b, out, &epilogue) {
            finite.store(false, Ordering::Relaxed);
        }
    };
    if workers > 1 {
        bufs.par_iter_mut().for_each(work);
    } else {
        bufs.iter_mut().for_each(work);
    }
    Ok(finite.into_inner())
}

/// Block `k` of `cut`: its tiles' input transform, the 16 products, and its output rows;
/// `false` when its input holds an infinity or NaN.
#[allow(clippy::too_many_arguments)]
fn block(s: &Shape, cut: &Blocks, k: usize, x: &[f32], u: &[f32], b: &mut Bufs, out: SharedMut<f32>, epilogue: &impl Fn(usize, &mut [f32])) -> bool {
    let (th, tw) = s.tiles();
    let (pp, mb, half) = (cut.pp, cut.mb, tw + 1);
    let mut flags = 0;
    for c in 0..s.cin {
        let vc = &mut b.v[c * X * pp..][..X * pp];
        for (image, tys, at) in cut.segments(th, tw, k) {
            let plane = &x[image * s.image_in() + c * s.h * s.w..][..s.h * s.w];
            let rows = 2 * tys.len() + 2;
            flags |= split(plane, s.w, s.pad, half, 2 * tys.start, rows, &mut b.even, &mut b.odd);
            for (j, _) in tys.clone().enumerate() {
                let even: [&[f32]; 4] = std::array::from_fn(|r| &b.even[(2 * j + r) * half..][..half]);
                let odd: [&[f32]; 4] = std::array::from_fn(|r| &b.odd[(2 * j + r) * half..][..half]);
                winograd_input_tiles(even, odd, &mut vc[at + j * tw..], pp, tw);
            }
        }
    }
    if flags != 0 {
        return false;
    }
    let (v, p) = (&*b.v, cut.tiles(k, tw));
    for (xi, mx) in b.m.chunks_mut(mb).enumerate() {
        let a = Operand { data: &u[xi * s.cin..], strides: [X * s.cin, 1] };
        let bx = Operand { data: &v[xi * pp..], strides: [X * pp, 1] };
        product_strided(Engine::Gemm, false, false, [s.cout, s.cin, p], a, bx, mx, pp);
    }
    for co in 0..s.cout {
        for (image, tys, at) in cut.segments(th, tw, k) {
            let first = 2 * tys.start;
            let len = ((2 * tys.end).min(s.oh) - first) * s.ow;
            // SAFETY: rows `2 ty0..2 ty1` of a plane are written by the one block holding
            // tile rows `ty0..ty1` of its image, and `y` outlives the blocks.
            let rows = unsafe { out.range((image * s.cout + co) * s.oh * s.ow + first * s.ow, len) };
            output_rows(s, &b.m[co * pp + at..], mb, tys, rows, &mut b.edge);
            epilogue(co, rows);
        }
    }
    true
}

/// Padded rows `first..first + rows` of the `[H, w]` `plane` (zero-padded by `pad`) as rows of
/// `half` even columns (`even`) and of `half` odd ones (`odd`); the sign bit of the result set
/// where those rows hold an infinity or NaN.
#[allow(clippy::too_many_arguments)]
fn split(plane: &[f32], w: usize, pad: (usize, usize), half: usize, first: usize, rows: usize, even: &mut [f32], odd: &mut [f32]) -> u32 {
    let (even, odd) = (&mut even[..rows * half], &mut odd[..rows * half]);
    even.fill(0.0);
    odd.fill(0.0);
    let (pairs, rest) = (w / 2, w % 2);
    let mut flags = 0;
    for (at, (e, o)) in even.chunks_exact_mut(half).zip(odd.chunks_exact_mut(half)).enumerate() {
        let Some(src) = (first + at).checked_sub(pad.0).and_then(|r| plane.chunks_exact(w).nth(r)) else { continue };
        // Padded column 2k + b holds src[2k + b - pad]: with an odd padding, a source pair
        // is an odd column then the next even one.
        let (first, second, shift) = match pad.1 {
            1 => (o, &mut e[1..], 0),
            p => (e, o, p / 2),
        };
        deinterleave(src, &mut first[shift..], &mut second[shift..], pairs, &mut flags);
        if rest == 1 {
            first[shift + pairs] = src[w - 1];
            flags |= non_finite_bit(src[w - 1]);
        }
    }
    flags
}

/// Tile rows `tys` of one output plane from `m` (position `x`'s tiles at `m[x * stride..]`,
/// row by row), into `rows` (the plane's rows from `2 tys.start`); `edge` (`4 tw`) takes the
/// rows a whole tile would write past the plane's edge.
fn output_rows(s: &Shape, m: &[f32], stride: usize, tys: std::ops::Range<usize>, rows: &mut [f32], edge: &mut [f32]) {
    let tw = s.tiles().1;
    for (j, ty) in tys.enumerate() {
        let m = &m[j * tw..];
        if 2 * ty + 2 <= s.oh && s.ow.is_multiple_of(2) {
            let (top, bottom) = rows[2 * j * s.ow..][..2 * s.ow].split_at_mut(s.ow);
            winograd_output_tiles(m, stride, tw, top, bottom);
            continue;
        }
        let (top, bottom) = edge.split_at_mut(2 * tw);
        winograd_output_tiles(m, stride, tw, top, bottom);
        for (r, row) in [&*top, &*bottom].into_iter().enumerate().take(s.oh - 2 * ty) {
            rows[(2 * j + r) * s.ow..][..s.ow].copy_from_slice(&row[..s.ow]);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use liandan_tensor::ops::{Conv2d, Conv2dBackwardInput, Conv2dBiasRelu};
    use liandan_tensor::{DType, Layout, Strided};

    use super::*;

    /// The convolution by its definition, in f64: `[N, C, H, W]` by `[O, C, 3, 3]`, padding `p`.
    fn direct(x: &[f64], w: &[f64], g: ConvGeometry) -> Vec<f64> {
        let (oh, ow) = (g.h + 2 * g.padding.0 - 2, g.w + 2 * g.padding.1 - 2);
        let mut y = vec![0.0; g.n * g.o * oh * ow];
        for (n, o, yo, xo) in (0..g.n).flat_map(|n| (0..g.o).flat_map(move |o| (0..oh).flat_map(move |a| (0..ow).map(move |b| (n, o, a, b))))) {
            let mut sum = 0.0;
            for (c, i, j) in (0..g.c).flat_map(|c| (0..3).flat_map(move |i| (0..3).map(move |j| (c, i, j)))) {
                let (yi, xi) = ((yo + i).wrapping_sub(g.padding.0), (xo + j).wrapping_sub(g.padding.1));
                if yi < g.h && xi < g.w {
                    sum += x[((n * g.c + c) * g.h + yi) * g.w + xi] * w[((o * g.c + c) * 3 + i) * 3 + j];
                }
            }
            y[((n * g.o + o) * oh + yo) * ow + xo] = sum;
        }
        y
    }

    /// The input gradient by its definition: `dx[n, c, y, x] = sum dy[n, o, yo, xo] w[o, c, i,
    /// j]` over the taps with `yo + i - p = y`, `xo + j - p = x`.
    fn direct_backward_input(dy: &[f64], w: &[f64], g: ConvGeometry) -> Vec<f64> {
        let (oh, ow) = (g.h + 2 * g.padding.0 - 2, g.w + 2 * g.padding.1 - 2);
        let mut dx = vec![0.0; g.n * g.c * g.h * g.w];
        for (n, o, yo, xo) in (0..g.n).flat_map(|n| (0..g.o).flat_map(move |o| (0..oh).flat_map(move |a| (0..ow).map(move |b| (n, o, a, b))))) {
            let d = dy[((n * g.o + o) * oh + yo) * ow + xo];
            for (c, i, j) in (0..g.c).flat_map(|c| (0..3).flat_map(move |i| (0..3).map(move |j| (c, i, j)))) {
                let (yi, xi) = ((yo + i).wrapping_sub(g.padding.0), (xo + j).wrapping_sub(g.padding.1));
                if yi < g.h && xi < g.w {
                    dx[((n * g.c + c) * g.h + yi) * g.w + xi] += d * w[((o * g.c + c) * 3 + i) * 3 + j];
                }
            }
        }
        dx
    }

    pub(crate) fn seeded(n: usize, seed: usize) -> Vec<f64> {
        (0..n).map(|i| (((i * 7919 + seed * 104729) % 1999) as f64 / 999.5 - 1.0) * 1.3).collect()
    }

    fn geometry(n: usize, c: usize, o: usize, (h, w): (usize, usize), p: (usize, usize)) -> ConvGeometry {
        ConvGeometry { n, c, h, w, o, groups: 1, kernel: (3, 3), stride: (1, 1), padding: p, dilation: (1, 1) }
    }

    fn storage(values: &[f64], dtype: DType) -> CpuStorage {
        match dtype {
            DType::F64 => CpuStorage::F64(values.to_vec().into()),
            _ => CpuStorage::F32(values.iter().map(|&v| v as f32).collect::<Vec<_>>().into()),
        }
    }

    fn f32s(v: &[f64]) -> Vec<f32> {
        v.iter().map(|&a| a as f32).collect()
    }

    pub(crate) fn values(s: &CpuStorage) -> Vec<f64> {
        match s {
            CpuStorage::F32(a) => a.iter().map(|&v| v as f64).collect(),
            CpuStorage::F64(a) => a.to_vec(),
            other => panic!("unexpected {:?}", other.dtype()),
        }
    }

    /// Runs `kernel` on contiguous `[shape, values]` operands of `dtype`.
    pub(crate) fn run<R>(operands: &[(&[usize], &[f64])], dtype: DType, kernel: impl FnOnce(&[Strided]) -> R) -> R {
        let stores: Vec<(CpuStorage, Layout)> = operands.iter().map(|(shape, v)| (storage(v, dtype), Layout::contiguous(shape))).collect();
        let views: Vec<Strided> = stores.iter().map(|(s, layout)| Strided { storage: s, layout, dtype }).collect();
        kernel(&views)
    }

    pub(crate) fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: element {k}: {g} against {w}");
        }
    }

    /// N, C, O, (H, W), padding.
    type Case = (usize, usize, usize, (usize, usize), (usize, usize));

    /// Odd and even sizes (tiles cut by the edge), paddings 0 to 2, channel counts off the
    /// vector width, 1 x 1 images, and a batch of two blocks (256 tiles an image, 4 images a
    /// block).
    const CASES: [Case; 6] = [
        (3, 16, 17, (1, 1), (1, 1)),
        (3, 16, 24, (19, 21), (1, 1)),
        (2, 16, 17, (24, 23), (0, 0)),
        (2, 17, 16, (20, 19), (2, 1)),
        (2, 16, 16, (19, 20), (1, 2)),
        (5, 16, 16, (32, 32), (1, 1)),
    ];

    #[test]
    fn forward_and_input_gradient_match_the_definition() {
        for (n, c, o, hw, p) in CASES {
            // The kernels take these though `applies` sends only padded layers of 64 channels.
            let g = geometry(n, c, o, hw, p);
            let (oh, ow) = (g.h + 2 * p.0 - 2, g.w + 2 * p.1 - 2);
            let (x, w, dy, b) = (seeded(n * c * g.h * g.w, 1), seeded(o * c * 9, 2), seeded(n * o * oh * ow, 3), seeded(o, 4));
            let y = forward(&f32s(&x), &f32s(&w), g, |_, _| {}).unwrap().expect("finite operands");
            close(&format!("forward {g:?}"), &values(&y), &direct(&x, &w, g), 1e-5);
            let dx = backward_input(&f32s(&dy), &f32s(&w), g).unwrap().expect("finite operands");
            close(&format!("input gradient {g:?}"), &values(&dx), &direct_backward_input(&dy, &w, g), 1e-5);
            // The bias and ReLU on each plane as it is written.
            let want: Vec<f64> = direct(&x, &w, g)
                .chunks(oh * ow)
                .enumerate()
                .flat_map(|(i, plane)| plane.iter().map(|&v| (v + b[i % o]).max(0.0)).collect::<Vec<_>>())
                .collect();
            let epilogue = |co: usize, plane: &mut [f32]| plane.iter_mut().for_each(|v| *v = (*v + b[co] as f32).max(0.0));
            let y = forward(&f32s(&x), &f32s(&w), g, epilogue).unwrap().expect("finite operands");
            close(&format!("forward with bias and ReLU {g:?}"), &values(&y), &want, 1e-5);
        }
    }

    /// An infinity or NaN in an operand leaves the pass to im2col, whose result (checked
    /// against the f64 kernel, which never takes Winograd) keeps each to its own windows.
    #[test]
    fn non_finite_operands_run_on_im2col() {
        let g = geometry(2, 64, 64, (16, 16), (1, 1));
        assert!(applies(&g));
        let (xs, ws, ys) = ([2, 64, 16, 16], [64, 64, 3, 3], [2, 64, 16, 16]);
        let (mut x, mut w, mut dy) = (seeded(2 * 64 * 256, 5), seeded(64 * 64 * 9, 6), seeded(2 * 64 * 256, 7));
        let conv = |x: &[f64], w: &[f64], dtype| {
            let y = run(&[(&xs, x), (&ws, w)], dtype, |v| crate::conv::fused(&Conv2d(g), v)).unwrap().unwrap();
            values(&y)
        };
        let input = |dy: &[f64], w: &[f64], dtype| {
            let dx = run(&[(&ys, dy), (&ws, w)], dtype, |v| crate::conv::fused(&Conv2dBackwardInput(g), v)).unwrap().unwrap();
            values(&dx)
        };
        let same = |what: &str, got: Vec<f64>, want: Vec<f64>| {
            assert!(got.iter().any(|v| !v.is_finite()), "{what}: the non-finite value reaches the output");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let agree = if w.is_finite() { (g - w).abs() <= 1e-4 * (1.0 + w.abs()) } else { g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()) };
                assert!(agree, "{what}: element {k}: {g} against {w}");
            }
        };
        x[100] = f64::INFINITY;
        assert!(forward(&f32s(&x), &f32s(&w), g, |_, _| {}).unwrap().is_none());
        same("forward, inf in x", conv(&x, &w, DType::F32), conv(&x, &w, DType::F64));
        x[100] = 0.5;
        w[40] = f64::NAN;
        assert!(forward(&f32s(&x), &f32s(&w), g, |_, _| {}).unwrap().is_none());
        same("forward, NaN in w", conv(&x, &w, DType::F32), conv(&x, &w, DType::F64));
        w[40] = 0.5;
        dy[300] = f64::NEG_INFINITY;
        assert!(backward_input(&f32s(&dy), &f32s(&w), g).unwrap().is_none());
        same("input gradient, -inf in dy", input(&dy, &w, DType::F32), input(&dy, &w, DType::F64));
        // And the bias-and-ReLU forward, through the same fallback.
        x[7] = f64::NAN;
        let b = seeded(64, 8);
        let relu = |dtype| values(&run(&[(&xs, &x), (&ws, &w), (&[64], &b)], dtype, |v| crate::conv::fused(&Conv2dBiasRelu(g), v)).unwrap().unwrap());
        let (got, want) = (relu(DType::F32), relu(DType::F64));
        close("forward with bias and ReLU, NaN in x", &got, &want, 1e-4);
    }

    #[test]
    fn only_padded_stride_one_3x3_convolutions_of_64_channels_with_tiles_enough_apply() {
        let g = geometry(2, 64, 128, (16, 16), (1, 1));
        assert!(applies(&g));
        assert!(!applies(&ConvGeometry { c: 3, ..g }));
        assert!(!applies(&ConvGeometry { o: 32, ..g }));
        assert!(!applies(&ConvGeometry { stride: (2, 2), ..g }));
        assert!(!applies(&ConvGeometry { kernel: (1, 1), padding: (0, 0), ..g }));
        assert!(!applies(&ConvGeometry { dilation: (2, 2), ..g }));
        assert!(!applies(&ConvGeometry { groups: 2, ..g }));
        assert!(!applies(&ConvGeometry { padding: (0, 0), ..g }));
        assert!(!applies(&ConvGeometry { padding: (2, 2), ..g }));
        // 4 tiles an image: the batch needs 32 images.
        assert!(!applies(&ConvGeometry { n: 31, h: 4, w: 4, ..g }));
        assert!(applies(&ConvGeometry { n: 32, h: 4, w: 4, ..g }));
    }
}
