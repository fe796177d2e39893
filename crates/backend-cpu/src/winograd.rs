//! Winograd F(2x2, 3x3) for the stride-1 3x3 convolutions (one group, no dilation) and their
//! input gradients (a stride-1 3x3 convolution too, of the output gradient with the flipped,
//! transposed weights): each 4x4 input tile and each 3x3 filter are transformed, 16 products
//! of `[O, C] x [C, tiles]` replace the im2col product, and each 2x2 output tile is transformed
//! back. That is 16 multiply-adds a tile where im2col takes 36 (2.25x fewer), which is what a
//! convolution bound by its product gains, less the transforms.
//!
//! Dimension letters as in `conv.rs`; P the tiles of a block of images, X = 16 the positions of
//! a transformed tile.

use liandan_tensor::{ConvGeometry, Result};
use rayon::prelude::*;

use crate::matmul::{product, Engine, Operand};
use crate::storage::{alloc, scratch, Held, Real};

/// Positions of a transformed tile (4x4).
const X: usize = 16;

/// Tiles a block of images gets at least, so each of its 16 products has columns enough.
const MIN_TILES: usize = 512;

/// Channels a convolution needs on both sides to run here: with fewer, its products are too
/// thin for the transforms to pay (resnet18's 3-channel stem).
const MIN_CHANNELS: usize = 16;

/// Whether a convolution with this geometry runs here: 3x3, stride 1, no dilation, one group,
/// padding of at most 2 (the input gradient's padding is `2 - p`), [`MIN_CHANNELS`] in and
/// out, and an output.
pub(crate) fn applies(g: &ConvGeometry) -> bool {
    let out = |size: usize, p: usize| size + 2 * p >= 3;
    let shaped = g.kernel == (3, 3) && g.stride == (1, 1) && g.dilation == (1, 1) && g.groups == 1;
    shaped && g.c.min(g.o) >= MIN_CHANNELS && g.padding.0 <= 2 && g.padding.1 <= 2 && out(g.h, g.padding.0) && out(g.w, g.padding.1)
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

    /// The zero-padded plane a tile row reads from: `2 * th + 2` rows of `2 * tw + 2`.
    fn padded(&self) -> (usize, usize) {
        let (th, tw) = self.tiles();
        (2 * th + 2, 2 * tw + 2)
    }
}

/// `G g G^T` for one 3x3 filter `g` (rows of 3), as 16 values.
fn filter<T: Real>(g: [T; 9]) -> [T; X] {
    let half = T::from_f64(0.5);
    // t = G g, 4 rows of 3.
    let mut t = [T::zero(); 12];
    for j in 0..3 {
        let (a, b, c) = (g[j], g[3 + j], g[6 + j]);
        t[j] = a;
        t[3 + j] = (a + b + c) * half;
        t[6 + j] = (a - b + c) * half;
        t[9 + j] = c;
    }
    let mut u = [T::zero(); X];
    for r in 0..4 {
        let (a, b, c) = (t[3 * r], t[3 * r + 1], t[3 * r + 2]);
        u[4 * r] = a;
        u[4 * r + 1] = (a + b + c) * half;
        u[4 * r + 2] = (a - b + c) * half;
        u[4 * r + 3] = c;
    }
    u
}

/// The transformed filters `[Cout, X, Cin]` (an output channel's together, so they are made
/// in parallel) from weights read through `at(co, ci)`, the 3x3 filter from input channel `ci`
/// to output channel `co`.
fn filters<T: Real>(op: &'static str, cout: usize, cin: usize, at: impl Fn(usize, usize) -> [T; 9] + Sync) -> Result<Vec<T>> {
    let mut u = alloc(op, cout * X * cin, T::zero())?;
    u.par_chunks_mut(X * cin).enumerate().for_each(|(co, row)| {
        for ci in 0..cin {
            for (x, v) in filter(at(co, ci)).into_iter().enumerate() {
                row[x * cin + ci] = v;
            }
        }
    });
    Ok(u)
}

/// The convolution of `s` with the transformed filters `u` (`[Cout, X, Cin]`), into `y`;
/// `epilogue(co, plane)` runs on each output plane once it is written.
fn convolve<T: Real + crate::matmul::Gemm>(op: &'static str, s: Shape, x: &[T], u: &[T], y: &mut [T], epilogue: impl Fn(usize, &mut [T]) + Sync) -> Result<()> {
    let (th, tw) = s.tiles();
    let tiles = th * tw;
    let (image_in, image_out) = (s.cin * s.h * s.w, s.cout * s.oh * s.ow);
    if tiles == 0 || s.n == 0 || image_out == 0 {
        return Ok(());
    }
    let nb = MIN_TILES.div_ceil(tiles).clamp(1, s.n);
    let most = nb * tiles;
    // V `[Cin, X, P]` (a channel's transformed tiles together, so channels transform in
    // parallel) and M `[X, Cout, P]` (each position's product one row-major block).
    let mut v = scratch(op, s.cin * X * most, T::zero())?;
    let mut m = scratch(op, X * s.cout * most, T::zero())?;
    let (ph, pw) = s.padded();
    for n0 in (0..s.n).step_by(nb) {
        let nb = nb.min(s.n - n0);
        let p = nb * tiles;
        let v = &mut v[..s.cin * X * p];
        v.par_chunks_mut(X * p).enumerate().for_each_init(
            || vec![T::zero(); ph * pw],
            |pad, (c, vc)| {
                for i in 0..nb {
                    let plane = &x[(n0 + i) * image_in + c * s.h * s.w..][..s.h * s.w];
                    pad_plane(&s, plane, pad);
                    input_tiles(&s, pad, vc, i * tiles, p);
                }
            },
        );
        let m = &mut m[..X * s.cout * p];
        let v = &*v;
        m.par_chunks_mut(s.cout * p).enumerate().for_each(|(xi, mx)| {
            let a = Operand { data: &u[xi * s.cin..], strides: [X * s.cin, 1] };
            let b = Operand { data: &v[xi * p..], strides: [X * p, 1] };
            product(Engine::Gemm, false, false, [s.cout, s.cin, p], a, b, mx);
        });
        let m = &*m;
        let planes = &mut y[n0 * image_out..][..nb * image_out];
        planes.par_chunks_mut(s.oh * s.ow).enumerate().for_each(|(j, plane)| {
            let (i, co) = (j / s.cout, j % s.cout);
            output_tiles(&s, m, co, p, i * tiles, plane);
            epilogue(co, plane);
        });
    }
    Ok(())
}

/// Copies an `[H, W]` plane into the middle of the zero-padded `pad` ([`Shape::padded`]).
fn pad_plane<T: Real>(s: &Shape, plane: &[T], pad: &mut [T]) {
    let (rows, cols) = s.padded();
    pad.fill(T::zero());
    for r in 0..s.h.min(rows - s.pad.0) {
        let n = s.w.min(cols - s.pad.1);
        pad[(r + s.pad.0) * cols + s.pad.1..][..n].copy_from_slice(&plane[r * s.w..][..n]);
    }
}

/// Tiles transformed together, each step of a transform a loop over them (so it vectorizes,
/// where tile by tile it would not).
const RUN: usize = 16;

/// `B^T d B` of every 4x4 tile `d` of the padded plane, tile `t` at column `first + t` of each
/// position's row in `vc` (`[X, P]`, rows `p` long).
// One index runs over several arrays at once, which zipped iterators would hide.
#[allow(clippy::needless_range_loop)]
fn input_tiles<T: Real>(s: &Shape, pad: &[T], vc: &mut [T], first: usize, p: usize) {
    let (th, tw) = s.tiles();
    let cols = s.padded().1;
    for ty in 0..th {
        let rows: [&[T]; 4] = std::array::from_fn(|r| &pad[(2 * ty + r) * cols..][..cols]);
        for tx0 in (0..tw).step_by(RUN) {
            let n = RUN.min(tw - tx0);
            // t = B^T d: t[r][j][k] of tile tx0 + k.
            let mut t = [[[T::zero(); RUN]; 4]; 4];
            for j in 0..4 {
                for k in 0..n {
                    let x = 2 * (tx0 + k) + j;
                    let (d0, d1, d2, d3) = (rows[0][x], rows[1][x], rows[2][x], rows[3][x]);
                    t[0][j][k] = d0 - d2;
                    t[1][j][k] = d1 + d2;
                    t[2][j][k] = d2 - d1;
                    t[3][j][k] = d1 - d3;
                }
            }
            // v = t B, row by row, each of the 16 positions a run of n tiles.
            let at = first + ty * tw + tx0;
            for (r, [t0, t1, t2, t3]) in t.iter().enumerate() {
                let (v01, v23) = vc[4 * r * p..][..4 * p].split_at_mut(2 * p);
                let (v0, v1) = v01.split_at_mut(p);
                let (v2, v3) = v23.split_at_mut(p);
                let [v0, v1, v2, v3] = [v0, v1, v2, v3].map(|v| &mut v[at..at + n]);
                for k in 0..n {
                    v0[k] = t0[k] - t2[k];
                    v1[k] = t1[k] + t2[k];
                    v2[k] = t2[k] - t1[k];
                    v3[k] = t1[k] - t3[k];
                }
            }
        }
    }
}

/// `A^T m A` of output channel `co`'s tiles of one image (from column `first` of each
/// position's `[Cout, P]` block of `m`), into its `[OH, OW]` plane.
// One index runs over several arrays at once, which zipped iterators would hide.
#[allow(clippy::needless_range_loop)]
fn output_tiles<T: Real>(s: &Shape, m: &[T], co: usize, p: usize, first: usize, plane: &mut [T]) {
    let (th, tw) = s.tiles();
    let rows: [&[T]; X] = std::array::from_fn(|x| &m[(x * s.cout + co) * p + first..][..th * tw]);
    for ty in 0..th {
        for tx0 in (0..tw).step_by(RUN) {
            let (n, t0) = (RUN.min(tw - tx0), ty * tw + tx0);
            let e: [&[T]; X] = std::array::from_fn(|x| &rows[x][t0..t0 + n]);
            // a = A^T m: a[r][j][k] of tile tx0 + k.
            let mut a = [[[T::zero(); RUN]; 4]; 2];
            for j in 0..4 {
                let (e0, e1, e2, e3) = (e[j], e[4 + j], e[8 + j], e[12 + j]);
                for k in 0..n {
                    a[0][j][k] = e0[k] + e1[k] + e2[k];
                    a[1][j][k] = e1[k] - e2[k] - e3[k];
                }
            }
            for (r, [a0, a1, a2, a3]) in a.iter().enumerate() {
                let y = 2 * ty + r;
                if y >= s.oh {
                    continue;
                }
                let row = &mut plane[y * s.ow..][..s.ow];
                let x0 = 2 * tx0;
                // Whole tiles two columns each; the edge's last tile may have one.
                let whole = n.min((s.ow - x0) / 2);
                for (k, pair) in row[x0..x0 + 2 * whole].chunks_exact_mut(2).enumerate() {
                    pair[0] = a0[k] + a1[k] + a2[k];
                    pair[1] = a1[k] - a2[k] - a3[k];
                }
                if whole < n {
                    row[x0 + 2 * whole] = a0[whole] + a1[whole] + a2[whole];
                }
            }
        }
    }
}

/// The 3x3 filter of `w` (`[O, C, 3, 3]`) from input channel `c` to output channel `o`.
fn tap<T: Copy>(w: &[T], c_all: usize, o: usize, c: usize) -> [T; 9] {
    std::array::from_fn(|k| w[(o * c_all + c) * 9 + k])
}

/// `y = conv(x, w)` for `x` `[N, C, H, W]`, `w` `[O, C, 3, 3]` ([`applies`]), with
/// `epilogue(o, plane)` on each output plane (the bias, the ReLU).
pub(crate) fn forward<T: Real + crate::matmul::Gemm>(x: &[T], w: &[T], g: ConvGeometry, y: &mut [T], epilogue: impl Fn(usize, &mut [T]) + Sync) -> Result<()> {
    const OP: &str = "conv2d";
    let s = Shape::new(g.n, g.c, g.o, (g.h, g.w), g.padding);
    let u = filters(OP, g.o, g.c, |o, c| tap(w, g.c, o, c))?;
    let _u = Held::new(u.len() * std::mem::size_of::<T>());
    let r = convolve(OP, s, x, &u, y, epilogue);
    crate::pool::give(u);
    r
}

/// `dx = conv(dy, flip(w)^T)` with padding `2 - p`, the input gradient of [`forward`]: `dy`
/// `[N, O, OH, OW]`, `dx` `[N, C, H, W]`.
pub(crate) fn backward_input<T: Real + crate::matmul::Gemm>(dy: &[T], w: &[T], g: ConvGeometry, dx: &mut [T]) -> Result<()> {
    const OP: &str = "conv2d_backward_input";
    let (oh, ow) = (g.h + 2 * g.padding.0 - 2, g.w + 2 * g.padding.1 - 2);
    let s = Shape::new(g.n, g.o, g.c, (oh, ow), (2 - g.padding.0, 2 - g.padding.1));
    debug_assert_eq!((s.oh, s.ow), (g.h, g.w));
    // From input channel o of dy to output channel c of dx: w[o, c] turned by 180 degrees.
    let u = filters(OP, g.c, g.o, |c, o| {
        let f = tap(w, g.c, o, c);
        std::array::from_fn(|k| f[8 - k])
    })?;
    let _u = Held::new(u.len() * std::mem::size_of::<T>());
    let r = convolve(OP, s, dy, &u, dx, |_, _| {});
    crate::pool::give(u);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convolution by its definition, in f64: `[N, C, H, W]` by `[O, C, 3, 3]`, padding `p`.
    fn direct(x: &[f64], w: &[f64], g: ConvGeometry) -> Vec<f64> {
        let (oh, ow) = (g.h + 2 * g.padding.0 - 2, g.w + 2 * g.padding.1 - 2);
        let mut y = vec![0.0; g.n * g.o * oh * ow];
        for n in 0..g.n {
            for o in 0..g.o {
                for (yo, xo) in (0..oh).flat_map(|a| (0..ow).map(move |b| (a, b))) {
                    let mut sum = 0.0;
                    for c in 0..g.c {
                        for (i, j) in (0..3).flat_map(|i| (0..3).map(move |j| (i, j))) {
                            let (yi, xi) = ((yo + i) as isize - g.padding.0 as isize, (xo + j) as isize - g.padding.1 as isize);
                            if (0..g.h as isize).contains(&yi) && (0..g.w as isize).contains(&xi) {
                                sum += x[((n * g.c + c) * g.h + yi as usize) * g.w + xi as usize] * w[((o * g.c + c) * 3 + i) * 3 + j];
                            }
                        }
                    }
                    y[((n * g.o + o) * oh + yo) * ow + xo] = sum;
                }
            }
        }
        y
    }

    /// The input gradient by its definition: `dx[n, c, y, x] = sum dy[n, o, yo, xo] w[o, c,
    /// i, j]` over the taps with `yo + i - p = y`, `xo + j - p = x`.
    fn direct_backward_input(dy: &[f64], w: &[f64], g: ConvGeometry) -> Vec<f64> {
        let (oh, ow) = (g.h + 2 * g.padding.0 - 2, g.w + 2 * g.padding.1 - 2);
        let mut dx = vec![0.0; g.n * g.c * g.h * g.w];
        for n in 0..g.n {
            for o in 0..g.o {
                for (yo, xo) in (0..oh).flat_map(|a| (0..ow).map(move |b| (a, b))) {
                    let d = dy[((n * g.o + o) * oh + yo) * ow + xo];
                    for c in 0..g.c {
                        for (i, j) in (0..3).flat_map(|i| (0..3).map(move |j| (i, j))) {
                            let (yi, xi) = ((yo + i) as isize - g.padding.0 as isize, (xo + j) as isize - g.padding.1 as isize);
                            if (0..g.h as isize).contains(&yi) && (0..g.w as isize).contains(&xi) {
                                dx[((n * g.c + c) * g.h + yi as usize) * g.w + xi as usize] += d * w[((o * g.c + c) * 3 + i) * 3 + j];
                            }
                        }
                    }
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

    fn close<T: Real>(what: &str, got: &[T], want: &[f64], atol: f64, rtol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            let g = g.to_f64();
            assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}: element {k}: {g} against {w}");
        }
    }

    /// Odd and even sizes (tiles cut by the edge), paddings 0 to 2, a 1x1 image, and batches of
    /// several blocks (4 tiles an image: 129 images are blocks of 128 and 1).
    /// N, C, O, (H, W), padding.
    type Case = (usize, usize, usize, (usize, usize), (usize, usize));

    const CASES: [Case; 6] = [
        (3, 5, 4, (7, 6), (1, 1)),
        (2, 3, 2, (5, 8), (0, 0)),
        (2, 2, 3, (4, 5), (2, 1)),
        (2, 3, 2, (1, 1), (1, 1)),
        (1, 2, 3, (3, 3), (0, 2)),
        (129, 2, 3, (4, 4), (1, 1)),
    ];

    #[test]
    fn forward_and_input_gradient_match_the_definition_in_f64_and_f32() {
        for (n, c, o, hw, p) in CASES {
            let g = geometry(n, c, o, hw, p);
            let (oh, ow) = (g.h + 2 * p.0 - 2, g.w + 2 * p.1 - 2);
            let (x, w, dy) = (seeded(n * c * g.h * g.w, 1), seeded(o * c * 9, 2), seeded(n * o * oh * ow, 3));
            let (want_y, want_dx) = (direct(&x, &w, g), direct_backward_input(&dy, &w, g));
            let what = format!("{g:?}");

            let mut y = vec![f64::NAN; want_y.len()];
            forward(&x, &w, g, &mut y, |_, _| {}).unwrap();
            close(&format!("f64 forward {what}"), &y, &want_y, 1e-12, 1e-12);
            let mut dx = vec![f64::NAN; want_dx.len()];
            backward_input(&dy, &w, g, &mut dx).unwrap();
            close(&format!("f64 input gradient {what}"), &dx, &want_dx, 1e-12, 1e-12);

            let f = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
            let mut y = vec![f32::NAN; want_y.len()];
            forward(&f(&x), &f(&w), g, &mut y, |_, _| {}).unwrap();
            close(&format!("f32 forward {what}"), &y, &want_y, 1e-4, 1e-4);
            let mut dx = vec![f32::NAN; want_dx.len()];
            backward_input(&f(&dy), &f(&w), g, &mut dx).unwrap();
            close(&format!("f32 input gradient {what}"), &dx, &want_dx, 1e-4, 1e-4);
        }
    }

    #[test]
    fn the_epilogue_sees_each_output_plane_with_its_channel() {
        let g = geometry(2, 3, 4, (5, 5), (1, 1));
        let (x, w) = (seeded(2 * 3 * 25, 4), seeded(4 * 3 * 9, 5));
        let want: Vec<f64> =
            direct(&x, &w, g).chunks(25).enumerate().flat_map(|(i, plane)| plane.iter().map(move |&v| (v + (i % 4) as f64).max(0.0))).collect();
        let mut y = vec![0.0; want.len()];
        forward(&x, &w, g, &mut y, |o, plane| plane.iter_mut().for_each(|v| *v = (*v + o as f64).max(0.0))).unwrap();
        close("bias and ReLU", &y, &want, 1e-12, 1e-12);
    }

    #[test]
    fn only_stride_one_3x3_single_group_convolutions_apply() {
        let g = geometry(2, 16, 32, (8, 8), (1, 1));
        assert!(applies(&g));
        assert!(!applies(&ConvGeometry { c: 3, ..g }));
        assert!(!applies(&ConvGeometry { stride: (2, 2), ..g }));
        assert!(!applies(&ConvGeometry { kernel: (1, 1), padding: (0, 0), ..g }));
        assert!(!applies(&ConvGeometry { dilation: (2, 2), ..g }));
        assert!(!applies(&ConvGeometry { groups: 2, ..g }));
        assert!(!applies(&ConvGeometry { padding: (3, 3), ..g }));
        assert!(!applies(&ConvGeometry { h: 1, padding: (0, 0), ..g }));
    }
}
