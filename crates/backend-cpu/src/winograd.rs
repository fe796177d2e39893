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
//! Dimension letters as in `conv.rs`; P the tiles of a block of images, X = 16 the positions
//! of a transformed tile.

use liandan_tensor::{ConvGeometry, Result};
use rayon::prelude::*;

use crate::matmul::{product_strided, Engine, Operand};
use crate::storage::{alloc_overwritten, scratch_overwritten, CpuStorage, Held, Scratch};
use crate::vmath::{deinterleave, non_finite_bit, winograd_input_tiles, winograd_output_tiles};

/// Positions of a transformed tile (4x4).
const X: usize = 16;

/// Tiles a block of images gets at least, so each of its 16 products has columns enough
/// (blocks of 256 to 4,096 tiles ran resnet18's layers within a few percent of each other).
const MIN_TILES: usize = 1024;

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

/// The convolution of `x` with the transformed filters `u` (`[Cout, X, Cin]`) into `y`, a
/// block of images at a time; `epilogue(co, plane)` runs on each output plane once it is
/// written. `false` (and `y` part written) when `x` holds an infinity or NaN.
fn convolve(op: &'static str, s: Shape, x: &[f32], u: &[f32], y: &mut [f32], epilogue: impl Fn(usize, &mut [f32]) + Sync) -> Result<bool> {
    let (th, tw) = s.tiles();
    let tiles = th * tw;
    if tiles == 0 || s.n == 0 || s.image_out() == 0 {
        return Ok(true);
    }
    let nb = MIN_TILES.div_ceil(tiles).clamp(1, s.n);
    // A position's row of tiles `pp` long and an output position's block `mb`: padded past
    // the multiples of 4 KiB that would put the 16 rows a transform reads or writes together
    // in the same cache sets.
    let pp = nb * tiles + 16;
    let mb = s.cout * pp + 16;
    // V `[Cin, X, P]` (a channel's transformed tiles together, so channels transform in
    // parallel) and M `[X, Cout, P]` (each position's product one block).
    let mut v = scratch_overwritten(op, s.cin * X * pp, 0.0)?;
    let mut m = scratch_overwritten(op, X * mb, 0.0)?;
    for n0 in (0..s.n).step_by(nb) {
        let nb = nb.min(s.n - n0);
        let p = nb * tiles;
        let finite = transform_input(&s, x, n0, nb, &mut v, pp);
        if !finite {
            return Ok(false);
        }
        let v = &*v;
        m.par_chunks_mut(mb).enumerate().for_each(|(xi, mx)| {
            let a = Operand { data: &u[xi * s.cin..], strides: [X * s.cin, 1] };
            let b = Operand { data: &v[xi * pp..], strides: [X * pp, 1] };
            product_strided(Engine::Gemm, false, false, [s.cout, s.cin, p], a, b, mx, pp);
        });
        let m = &*m;
        let planes = &mut y[n0 * s.image_out()..][..nb * s.image_out()];
        planes.par_chunks_mut(s.oh * s.ow).enumerate().for_each_init(
            || vec![0.0; 4 * tw],
            |edge, (j, plane)| {
                let (i, co) = (j / s.cout, j % s.cout);
                output_plane(&s, &m[co * pp + i * tiles..], mb, plane, edge);
                epilogue(co, plane);
            },
        );
    }
    Ok(true)
}

/// `B^T d B` of every input tile of images `n0..n0 + nb` of `x`, into `v` (`[Cin, X, pp]`,
/// image `i`'s tiles from column `i * tiles`); `false` when the images hold an infinity or
/// NaN.
fn transform_input(s: &Shape, x: &[f32], n0: usize, nb: usize, v: &mut [f32], pp: usize) -> bool {
    let (th, tw) = s.tiles();
    // A padded plane's rows split by column parity: `2 th + 2` rows of `tw + 1` each.
    let (rows, half) = (2 * th + 2, tw + 1);
    let finite = v[..s.cin * X * pp].par_chunks_mut(X * pp).enumerate().map_init(
        || (vec![0.0; rows * half], vec![0.0; rows * half]),
        |(even, odd), (c, vc)| {
            let mut flags = 0;
            for i in 0..nb {
                let plane = &x[(n0 + i) * s.image_in() + c * s.h * s.w..][..s.h * s.w];
                flags |= split(plane, s.w, s.pad, half, even, odd);
                for ty in 0..th {
                    let even: [&[f32]; 4] = std::array::from_fn(|r| &even[(2 * ty + r) * half..][..half]);
                    let odd: [&[f32]; 4] = std::array::from_fn(|r| &odd[(2 * ty + r) * half..][..half]);
                    winograd_input_tiles(even, odd, &mut vc[i * th * tw + ty * tw..], pp, tw);
                }
            }
            flags == 0
        },
    );
    finite.reduce(|| true, |a, b| a && b)
}

/// The `[H, w]` `plane` zero-padded by `pad` into rows of `half` even columns (`even`) and
/// of `half` odd ones (`odd`), zeros past its last row; the sign bit of the result set where
/// the plane holds an infinity or NaN.
fn split(plane: &[f32], w: usize, pad: (usize, usize), half: usize, even: &mut [f32], odd: &mut [f32]) -> u32 {
    even.fill(0.0);
    odd.fill(0.0);
    let (pairs, rest) = (w / 2, w % 2);
    let mut flags = 0;
    for (r, src) in plane.chunks_exact(w).enumerate() {
        let at = (r + pad.0) * half;
        let (e, o) = (&mut even[at..at + half], &mut odd[at..at + half]);
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

/// Every tile of one output plane from `m` (position `x`'s tiles at `m[x * stride..]`, row
/// by row), into `plane`; `edge` (`4 tw`) takes the rows a whole tile would write past the
/// plane's edge.
fn output_plane(s: &Shape, m: &[f32], stride: usize, plane: &mut [f32], edge: &mut [f32]) {
    let (th, tw) = s.tiles();
    let whole_rows = s.oh / 2;
    for ty in 0..th {
        let m = &m[ty * tw..];
        if ty < whole_rows && s.ow.is_multiple_of(2) {
            let (top, bottom) = plane[2 * ty * s.ow..][..2 * s.ow].split_at_mut(s.ow);
            winograd_output_tiles(m, stride, tw, top, bottom);
            continue;
        }
        let (top, bottom) = edge.split_at_mut(2 * tw);
        winograd_output_tiles(m, stride, tw, top, bottom);
        for (r, row) in [&*top, &*bottom].into_iter().enumerate().take(s.oh - 2 * ty) {
            plane[(2 * ty + r) * s.ow..][..s.ow].copy_from_slice(&row[..s.ow]);
        }
    }
}

#[cfg(test)]
mod tests {
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

    fn seeded(n: usize, seed: usize) -> Vec<f64> {
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

    fn values(s: &CpuStorage) -> Vec<f64> {
        match s {
            CpuStorage::F32(a) => a.iter().map(|&v| v as f64).collect(),
            CpuStorage::F64(a) => a.to_vec(),
            other => panic!("unexpected {:?}", other.dtype()),
        }
    }

    /// Runs `kernel` on contiguous `[shape, values]` operands of `dtype`.
    fn run<R>(operands: &[(&[usize], &[f64])], dtype: DType, kernel: impl FnOnce(&[Strided]) -> R) -> R {
        let stores: Vec<(CpuStorage, Layout)> = operands.iter().map(|(shape, v)| (storage(v, dtype), Layout::contiguous(shape))).collect();
        let views: Vec<Strided> = stores.iter().map(|(s, layout)| Strided { storage: s, layout, dtype }).collect();
        kernel(&views)
    }

    fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
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
