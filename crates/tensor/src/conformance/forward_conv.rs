//! Forward conformance of `im2col`/`col2im`, `conv2d` and pooling over `[N, C, H, W]`, against
//! direct loops.

use super::forward::check;
use super::{from_values, input, strided_input, values};
use crate::{DType, Device, Tensor};

/// A sliding window over `[N, C, H, W]`: kernel, stride, padding and dilation as (h, w) pairs.
#[derive(Clone, Copy, Debug)]
struct Geo {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
    d: (usize, usize),
}

impl Geo {
    fn oh(&self) -> usize {
        (self.h + 2 * self.p.0 - self.d.0 * (self.k.0 - 1) - 1) / self.s.0 + 1
    }
    fn ow(&self) -> usize {
        (self.w + 2 * self.p.1 - self.d.1 * (self.k.1 - 1) - 1) / self.s.1 + 1
    }
    fn x_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    fn out_shape(&self) -> [usize; 4] {
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
    fn each_window(&self, mut f: impl FnMut(usize, &[usize], usize)) {
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
const fn geo(n: usize, c: usize, h: usize, w: usize, k: (usize, usize), s: (usize, usize), p: (usize, usize), d: (usize, usize)) -> Geo {
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

const POOL: [Geo; 5] = [
    geo(2, 3, 7, 9, (3, 3), (2, 2), (1, 1), (1, 1)),
    geo(2, 3, 7, 9, (2, 3), (1, 2), (1, 1), (2, 1)),
    geo(2, 3, 33, 33, (3, 3), (2, 2), (1, 1), (2, 2)),
    geo(1, 2, 5, 5, (1, 1), (1, 1), (0, 0), (1, 1)),
    geo(2, 3, 33, 33, (2, 2), (2, 2), (0, 0), (1, 1)),
];

pub fn max_pool2d(d: &Device) {
    for g in POOL {
        // All inputs negative: a window that counted padding as 0 would return 0.
        let xv: Vec<f64> = values(g.x_shape().iter().product(), 220).iter().map(|x| x - 2.5).collect();
        let (x, xv) = from_values(d, &g.x_shape(), &xv, DType::F32);
        let mut want = vec![0.0; g.out_shape().iter().product()];
        g.each_window(|o, taps, _| want[o] = taps.iter().map(|&t| xv[t]).fold(f64::NEG_INFINITY, f64::max));
        check(&format!("max_pool2d {g:?}"), &x.max_pool2d(g.k, g.s, g.p, g.d), &g.out_shape(), &want, 0.0, 0.0);
        let sx = strided_input(d, &g.x_shape(), &xv, DType::F32);
        check(&format!("max_pool2d strided {g:?}"), &sx.max_pool2d(g.k, g.s, g.p, g.d), &g.out_shape(), &want, 0.0, 0.0);
        let (h, hv) = from_values(d, &g.x_shape(), &xv, DType::F16);
        let mut want = vec![0.0; want.len()];
        g.each_window(|o, taps, _| want[o] = taps.iter().map(|&t| hv[t]).fold(f64::NEG_INFINITY, f64::max));
        check(&format!("max_pool2d f16 {g:?}"), &h.max_pool2d(g.k, g.s, g.p, g.d), &g.out_shape(), &want, 0.0, 0.0);
    }
    let x = Tensor::ones(&[1, 1, 4, 4], DType::F32, d).unwrap();
    super::forward::expect_err("max_pool2d padding over half the kernel", x.max_pool2d((2, 2), (1, 1), (2, 2), (1, 1)));
}

pub fn avg_pool2d(d: &Device) {
    for g in POOL.iter().filter(|g| g.d == (1, 1)) {
        let (x, xv) = input(d, &g.x_shape(), 230, DType::F32);
        let sx = strided_input(d, &g.x_shape(), &xv, DType::F32);
        let (dy, dyv) = input(d, &g.out_shape(), 231, DType::F32);
        for cip in [true, false] {
            // count_include_pad divides by the whole window, else by the taps inside the input.
            let divisor = |taps: &[usize], full: usize| if cip { full as f64 } else { taps.len() as f64 };
            let mut want = vec![0.0; g.out_shape().iter().product()];
            let mut want_dx = vec![0.0; g.x_shape().iter().product()];
            g.each_window(|o, taps, full| {
                want[o] = taps.iter().map(|&t| xv[t]).sum::<f64>() / divisor(taps, full);
                for &t in taps {
                    want_dx[t] += dyv[o] / divisor(taps, full);
                }
            });
            let what = format!("avg_pool2d {g:?} count_include_pad={cip}");
            check(&what, &x.avg_pool2d(g.k, g.s, g.p, cip), &g.out_shape(), &want, 1e-6, 1e-5);
            check(&format!("{what} strided"), &sx.avg_pool2d(g.k, g.s, g.p, cip), &g.out_shape(), &want, 1e-6, 1e-5);
            let dx = dy.avg_pool2d_backward(&g.x_shape(), g.k, g.s, g.p, cip);
            check(&format!("{what} backward"), &dx, &g.x_shape(), &want_dx, 1e-6, 1e-5);
            let sdy = strided_input(d, &g.out_shape(), &dyv, DType::F32);
            check(&format!("{what} backward strided"), &sdy.avg_pool2d_backward(&g.x_shape(), g.k, g.s, g.p, cip), &g.x_shape(), &want_dx, 1e-6, 1e-5);
        }
    }
    // Odd windows with padding on one axis only.
    let g = geo(2, 3, 7, 9, (3, 2), (1, 1), (1, 0), (1, 1));
    let (x, xv) = input(d, &g.x_shape(), 232, DType::F64);
    let mut want = vec![0.0; g.out_shape().iter().product()];
    g.each_window(|o, taps, _| want[o] = taps.iter().map(|&t| xv[t]).sum::<f64>() / taps.len() as f64);
    check("avg_pool2d f64 (3, 2) padding (1, 0) exclude pad", &x.avg_pool2d(g.k, g.s, g.p, false), &g.out_shape(), &want, 1e-12, 1e-12);
}
