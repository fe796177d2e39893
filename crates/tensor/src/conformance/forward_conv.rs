//! Forward conformance of `im2col`/`col2im` and the convolutions (`conv2d`, `conv1d`,
//! `conv_transpose2d`) against direct loops, and their shape errors.

use super::forward::{check, expect_shapes_err};
use super::{input, strided_input};
use crate::{DType, Device, Tensor};

/// A sliding window over `[N, C, H, W]`: kernel, stride, padding and dilation as (h, w) pairs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geo {
    pub(super) n: usize,
    c: usize,
    h: usize,
    w: usize,
    pub(super) k: (usize, usize),
    pub(super) s: (usize, usize),
    pub(super) p: (usize, usize),
    pub(super) d: (usize, usize),
}

impl Geo {
    fn oh(&self) -> usize {
        (self.h + 2 * self.p.0 - self.d.0 * (self.k.0 - 1) - 1) / self.s.0 + 1
    }
    fn ow(&self) -> usize {
        (self.w + 2 * self.p.1 - self.d.1 * (self.k.1 - 1) - 1) / self.s.1 + 1
    }
    pub(super) fn x_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    pub(super) fn out_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.oh(), self.ow()]
    }
    /// Input row and column under kernel tap `(i, j)` of output `(oy, ox)`, if not padding.
    fn tap(&self, oy: usize, ox: usize, i: usize, j: usize) -> Option<(usize, usize)> {
        let y = (oy * self.s.0 + i * self.d.0) as isize - self.p.0 as isize;
        let x = (ox * self.s.1 + j * self.d.1) as isize - self.p.1 as isize;
        (y >= 0 && x >= 0 && (y as usize) < self.h && (x as usize) < self.w).then_some((y as usize, x as usize))
    }
    /// Calls `f(n, c, oy, ox, taps)` for every output position with its in-range input offsets
    /// (flat, into `[N, C, H, W]`) and the number of taps the padded window holds.
    pub(super) fn each_window(&self, mut f: impl FnMut(usize, &[usize], usize)) {
        let (oh, ow) = (self.oh(), self.ow());
        for nc in 0..self.n * self.c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let taps: Vec<usize> = (0..self.k.0 * self.k.1)
                        .filter_map(|t| self.tap(oy, ox, t / self.k.1, t % self.k.1))
                        .map(|(y, x)| (nc * self.h + y) * self.w + x)
                        .collect();
                    f((nc * oh + oy) * ow + ox, &taps, self.k.0 * self.k.1);
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) const fn geo(n: usize, c: usize, h: usize, w: usize, k: (usize, usize), s: (usize, usize), p: (usize, usize), d: (usize, usize)) -> Geo {
    Geo { n, c, h, w, k, s, p, d }
}

/// torch `unfold`: `[N, C, H, W] -> [N, C*kh*kw, oh*ow]`, padding reads 0.
fn ref_im2col(x: &[f64], g: &Geo) -> Vec<f64> {
    let (rows, l) = (g.c * g.k.0 * g.k.1, g.oh() * g.ow());
    let mut out = vec![0.0; g.n * rows * l];
    for n in 0..g.n {
        for c in 0..g.c {
            for i in 0..g.k.0 {
                for j in 0..g.k.1 {
                    let row = (c * g.k.0 + i) * g.k.1 + j;
                    for oy in 0..g.oh() {
                        for ox in 0..g.ow() {
                            if let Some((y, xx)) = g.tap(oy, ox, i, j) {
                                out[(n * rows + row) * l + oy * g.ow() + ox] = x[((n * g.c + c) * g.h + y) * g.w + xx];
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// torch `fold`: the adjoint of [`ref_im2col`], summing overlapping taps.
fn ref_col2im(cols: &[f64], g: &Geo) -> Vec<f64> {
    let (rows, l) = (g.c * g.k.0 * g.k.1, g.oh() * g.ow());
    let mut out = vec![0.0; g.n * g.c * g.h * g.w];
    for n in 0..g.n {
        for row in 0..rows {
            let (c, i, j) = (row / (g.k.0 * g.k.1), (row / g.k.1) % g.k.0, row % g.k.1);
            for col in 0..l {
                if let Some((y, x)) = g.tap(col / g.ow(), col % g.ow(), i, j) {
                    out[((n * g.c + c) * g.h + y) * g.w + x] += cols[(n * rows + row) * l + col];
                }
            }
        }
    }
    out
}

/// Direct convolution: `out[n, o, oy, ox] = b[o] + sum x[n, g*cg + ci, y, x] w[o, ci, i, j]`.
fn ref_conv2d(x: &[f64], wt: &[f64], bias: Option<&[f64]>, g: &Geo, o: usize, groups: usize) -> Vec<f64> {
    let (cg, og, (oh, ow)) = (g.c / groups, o / groups, (g.oh(), g.ow()));
    let mut out = vec![0.0; g.n * o * oh * ow];
    for n in 0..g.n {
        for oc in 0..o {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias.map_or(0.0, |b| b[oc]);
                    for ci in 0..cg {
                        let c = (oc / og) * cg + ci;
                        for i in 0..g.k.0 {
                            for j in 0..g.k.1 {
                                if let Some((y, xx)) = g.tap(oy, ox, i, j) {
                                    acc += x[((n * g.c + c) * g.h + y) * g.w + xx] * wt[((oc * cg + ci) * g.k.0 + i) * g.k.1 + j];
                                }
                            }
                        }
                    }
                    out[((n * o + oc) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    out
}

const IM2COL: [Geo; 5] = [
    geo(2, 3, 7, 9, (3, 2), (2, 1), (1, 0), (1, 2)),
    geo(1, 1, 1, 1, (1, 1), (1, 1), (0, 0), (1, 1)),
    geo(2, 3, 33, 33, (3, 3), (2, 2), (1, 1), (2, 2)),
    geo(1, 2, 5, 4, (5, 4), (1, 1), (0, 0), (1, 1)),
    geo(1, 4, 8, 8, (2, 2), (3, 3), (1, 1), (1, 1)),
];

pub fn im2col_col2im(d: &Device) {
    for g in IM2COL {
        let (x, xv) = input(d, &g.x_shape(), 200, DType::F32);
        let want = ref_im2col(&xv, &g);
        let cshape = [g.n, g.c * g.k.0 * g.k.1, g.oh() * g.ow()];
        check(&format!("im2col {g:?}"), &x.im2col(g.k, g.s, g.p, g.d), &cshape, &want, 0.0, 0.0);
        let sx = strided_input(d, &g.x_shape(), &xv, DType::F32);
        check(&format!("im2col strided {g:?}"), &sx.im2col(g.k, g.s, g.p, g.d), &cshape, &want, 0.0, 0.0);
        let (cols, cv) = input(d, &cshape, 201, DType::F32);
        let want = ref_col2im(&cv, &g);
        check(&format!("col2im {g:?}"), &cols.col2im((g.h, g.w), g.k, g.s, g.p, g.d), &g.x_shape(), &want, 1e-6, 1e-6);
        let sc = strided_input(d, &cshape, &cv, DType::F32);
        check(&format!("col2im strided {g:?}"), &sc.col2im((g.h, g.w), g.k, g.s, g.p, g.d), &g.x_shape(), &want, 1e-6, 1e-6);
    }
}

/// Convolution cases: geometry (its `c` is the input channels), output channels, groups, bias.
const CONV: [(Geo, usize, usize, bool); 8] = [
    (geo(2, 3, 7, 9, (3, 3), (1, 1), (0, 0), (1, 1)), 4, 1, true),
    (geo(2, 3, 7, 9, (3, 2), (2, 3), (1, 2), (2, 1)), 5, 1, true),
    (geo(2, 3, 33, 33, (3, 3), (2, 2), (1, 1), (1, 1)), 4, 1, true),
    (geo(2, 3, 7, 9, (3, 3), (1, 1), (1, 1), (1, 1)), 3, 3, false),
    (geo(1, 3, 9, 7, (3, 3), (2, 2), (1, 1), (1, 1)), 6, 3, true),
    (geo(2, 4, 7, 9, (3, 1), (1, 1), (0, 0), (2, 1)), 6, 2, true),
    (geo(1, 5, 1, 1, (1, 1), (1, 1), (0, 0), (1, 1)), 7, 1, false),
    (geo(1, 2, 4, 5, (4, 5), (1, 1), (2, 2), (1, 1)), 3, 1, true),
];

fn run_conv(d: &Device, dtype: DType, cases: &[(Geo, usize, usize, bool)], atol: f64, rtol: f64) {
    for &(g, o, groups, has_bias) in cases {
        let wshape = [o, g.c / groups, g.k.0, g.k.1];
        let (x, xv) = input(d, &g.x_shape(), 210, dtype);
        let (w, wv) = input(d, &wshape, 211, dtype);
        let (b, bv) = input(d, &[o], 212, dtype);
        let bias = has_bias.then_some(&b);
        let want = ref_conv2d(&xv, &wv, has_bias.then_some(&bv[..]), &g, o, groups);
        let oshape = [g.n, o, g.oh(), g.ow()];
        let what = format!("conv2d {dtype} {g:?} O={o} groups={groups} bias={has_bias}");
        check(&what, &x.conv2d(&w, bias, g.s, g.p, g.d, groups), &oshape, &want, atol, rtol);
        let (sx, sw) = (strided_input(d, &g.x_shape(), &xv, dtype), strided_input(d, &wshape, &wv, dtype));
        check(&format!("{what} strided"), &sx.conv2d(&sw, bias, g.s, g.p, g.d, groups), &oshape, &want, atol, rtol);
    }
}

pub fn conv2d(d: &Device) {
    run_conv(d, DType::F32, &CONV, 2e-5, 1e-5);
}

pub fn conv2d_dtypes(d: &Device) {
    let some = [CONV[1], CONV[4], CONV[5]];
    run_conv(d, DType::F64, &some, 1e-12, 1e-10);
    run_conv(d, DType::F16, &some, 1e-2, 1e-2);
    run_conv(d, DType::BF16, &some, 3e-2, 3e-2);
}

/// `(N, C, L, O, k, stride, padding, dilation, groups, bias)`.
type Conv1d = (usize, usize, usize, usize, usize, usize, usize, usize, usize, bool);

fn ref_conv1d(x: &[f64], w: &[f64], b: Option<&[f64]>, &(n, c, l, o, k, s, p, dl, g, _): &Conv1d) -> (Vec<f64>, [usize; 3]) {
    let lo = (l + 2 * p - dl * (k - 1) - 1) / s + 1;
    let (cg, og) = (c / g, o / g);
    let mut out = vec![0.0; n * o * lo];
    for (f, v) in out.iter_mut().enumerate() {
        let (ni, oc, t) = (f / (o * lo), (f / lo) % o, f % lo);
        *v = b.map_or(0.0, |b| b[oc]);
        for ci in 0..cg {
            for j in 0..k {
                let pos = (t * s + j * dl) as isize - p as isize;
                if pos >= 0 && (pos as usize) < l {
                    *v += x[(ni * c + (oc / og) * cg + ci) * l + pos as usize] * w[(oc * cg + ci) * k + j];
                }
            }
        }
    }
    (out, [n, o, lo])
}

pub fn conv1d(d: &Device) {
    let cases: [Conv1d; 5] = [
        (2, 3, 11, 4, 3, 1, 0, 1, 1, true),
        (2, 4, 9, 6, 3, 2, 1, 2, 2, true),
        (1, 3, 7, 3, 5, 1, 2, 1, 3, false),
        (1, 1, 1, 1, 1, 1, 0, 1, 1, true),
        (3, 2, 33, 5, 4, 3, 2, 1, 1, true),
    ];
    for case in cases {
        let (n, c, l, o, k, s, p, dl, g, has_b) = case;
        let (x, xv) = input(d, &[n, c, l], 600, DType::F32);
        let (w, wv) = input(d, &[o, c / g, k], 601, DType::F32);
        let (b, bv) = input(d, &[o], 602, DType::F32);
        let (want, shape) = ref_conv1d(&xv, &wv, has_b.then_some(&bv[..]), &case);
        let what = format!("conv1d {case:?}");
        check(&what, &x.conv1d(&w, has_b.then_some(&b), s, p, dl, g), &shape, &want, 1e-5, 1e-5);
        let sx = strided_input(d, &[n, c, l], &xv, DType::F32);
        check(&format!("{what} strided"), &sx.conv1d(&w, has_b.then_some(&b), s, p, dl, g), &shape, &want, 1e-5, 1e-5);
    }
    let (x, _) = input(d, &[2, 4, 9], 603, DType::F32);
    let w = Tensor::zeros(&[6, 3, 3], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&w, None, 1, 0, 1, 1), &[2, 4, 9], &[6, 3, 3]);
    let w4 = Tensor::zeros(&[6, 4, 3, 3], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&w4, None, 1, 0, 1, 1), &[2, 4, 9], &[6, 4, 3, 3]);
    let big = Tensor::zeros(&[6, 4, 12], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&big, None, 1, 1, 1, 1), &[2, 4, 9], &[6, 4, 12]);
    let w = Tensor::zeros(&[6, 4, 3], DType::F32, d).unwrap();
    expect_shapes_err("conv1d", x.conv1d(&w, Some(&Tensor::zeros(&[5], DType::F32, d).unwrap()), 1, 0, 1, 1), &[6, 4, 3], &[5]);
}

/// `(N, C_in, H, W, C_out, k, stride, padding, output_padding, dilation, groups)`.
type ConvT = (usize, usize, usize, usize, usize, (usize, usize), (usize, usize), (usize, usize), (usize, usize), (usize, usize), usize);

/// Direct scatter: input pixel `(y, x)` adds `x * w[ci, co, i, j]` at output
/// `(y*s - p + i*d, x*s - p + j*d)` of the output channels of its group.
fn ref_conv_transpose2d(x: &[f64], w: &[f64], b: Option<&[f64]>, &(n, ci, h, wd, co, k, s, p, op, dl, g): &ConvT) -> (Vec<f64>, [usize; 4]) {
    let oh = (h - 1) * s.0 + dl.0 * (k.0 - 1) + op.0 + 1 - 2 * p.0;
    let ow = (wd - 1) * s.1 + dl.1 * (k.1 - 1) + op.1 + 1 - 2 * p.1;
    let (cig, cog) = (ci / g, co / g);
    let mut out = vec![0.0; n * co * oh * ow];
    for f in 0..out.len() {
        out[f] = b.map_or(0.0, |b| b[(f / (oh * ow)) % co]);
    }
    for ni in 0..n {
        for c in 0..ci {
            for y in 0..h {
                for xx in 0..wd {
                    let v = x[((ni * ci + c) * h + y) * wd + xx];
                    for c2 in 0..cog {
                        let oc = (c / cig) * cog + c2;
                        for i in 0..k.0 {
                            for j in 0..k.1 {
                                let oy = (y * s.0 + i * dl.0) as isize - p.0 as isize;
                                let ox = (xx * s.1 + j * dl.1) as isize - p.1 as isize;
                                if oy >= 0 && ox >= 0 && (oy as usize) < oh && (ox as usize) < ow {
                                    out[((ni * co + oc) * oh + oy as usize) * ow + ox as usize] += v * w[((c * cog + c2) * k.0 + i) * k.1 + j];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (out, [n, co, oh, ow])
}

pub fn conv_transpose2d(d: &Device) {
    let cases: [ConvT; 6] = [
        (2, 4, 5, 4, 6, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2),
        (2, 3, 4, 5, 2, (3, 2), (1, 1), (0, 0), (0, 0), (1, 1), 1),
        (1, 2, 3, 3, 3, (2, 3), (3, 2), (1, 0), (2, 1), (1, 2), 1),
        // output_padding >= stride is allowed when smaller than the dilation.
        (1, 2, 4, 3, 2, (2, 2), (1, 1), (0, 1), (1, 1), (2, 2), 1),
        (1, 6, 7, 5, 3, (1, 1), (2, 3), (0, 0), (1, 2), (1, 1), 3),
        (1, 1, 1, 1, 1, (1, 1), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ];
    for (kk, case) in cases.into_iter().enumerate() {
        let (n, ci, h, wd, co, k, s, p, op, dl, g) = case;
        let seed = 610 + 3 * kk as u64;
        let (x, xv) = input(d, &[n, ci, h, wd], seed, DType::F32);
        let (w, wv) = input(d, &[ci, co / g, k.0, k.1], seed + 1, DType::F32);
        let (b, bv) = input(d, &[co], seed + 2, DType::F32);
        for has_b in [true, false] {
            let (want, shape) = ref_conv_transpose2d(&xv, &wv, has_b.then_some(&bv[..]), &case);
            let what = format!("conv_transpose2d {case:?} bias={has_b}");
            check(&what, &x.conv_transpose2d(&w, has_b.then_some(&b), s, p, op, dl, g), &shape, &want, 1e-5, 1e-5);
            let (sx, sw) = (strided_input(d, &[n, ci, h, wd], &xv, DType::F32), strided_input(d, &[ci, co / g, k.0, k.1], &wv, DType::F32));
            check(&format!("{what} strided"), &sx.conv_transpose2d(&sw, has_b.then_some(&b), s, p, op, dl, g), &shape, &want, 1e-5, 1e-5);
        }
    }
    let (x, xv) = input(d, &[1, 4, 3, 3], 630, DType::F64);
    let (w, wv) = input(d, &[4, 1, 3, 3], 631, DType::F64);
    let case = (1, 4, 3, 3, 2, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2);
    let (want, shape) = ref_conv_transpose2d(&xv, &wv, None, &case);
    check("conv_transpose2d f64", &x.conv_transpose2d(&w, None, (2, 2), (1, 1), (1, 1), (1, 1), 2), &shape, &want, 1e-12, 1e-12);
    let bad = Tensor::zeros(&[3, 1, 3, 3], DType::F64, d).unwrap();
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&bad, None, (1, 1), (0, 0), (0, 0), (1, 1), 1), &[1, 4, 3, 3], &[3, 1, 3, 3]);
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&w, None, (1, 1), (0, 0), (0, 0), (1, 1), 3), &[1, 4, 3, 3], &[4, 1, 3, 3]);
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&w, None, (2, 2), (0, 0), (2, 0), (1, 1), 1), &[1, 4, 3, 3], &[4, 1, 3, 3]);
    expect_shapes_err("conv_transpose2d", x.conv_transpose2d(&w, Some(&w), (1, 1), (0, 0), (0, 0), (1, 1), 1), &[4, 1, 3, 3], &[4, 1, 3, 3]);
}
