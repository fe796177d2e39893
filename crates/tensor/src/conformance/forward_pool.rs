//! Forward conformance of pooling over `[N, C, H, W]`: max and average windows (forward and
//! the average's backward) and the adaptive pools, against direct loops.

use super::forward::{check, expect_err};
use super::forward_conv::{geo, Geo};
use super::{from_values, input, strided_input, values};
use crate::{DType, Device, Tensor};

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

/// PyTorch's adaptive bins: `floor(i*len/out) .. ceil((i+1)*len/out)`.
fn bins(len: usize, out: usize) -> Vec<(usize, usize)> {
    (0..out).map(|i| (i * len / out, ((i + 1) * len).div_ceil(out))).collect()
}

fn ref_adaptive(x: &[f64], shape: [usize; 4], (oh, ow): (usize, usize), max: bool) -> Vec<f64> {
    let [n, c, h, w] = shape;
    let mut out = Vec::with_capacity(n * c * oh * ow);
    for nc in 0..n * c {
        for &(y0, y1) in &bins(h, oh) {
            for &(x0, x1) in &bins(w, ow) {
                let vals: Vec<f64> = (y0..y1).flat_map(|y| (x0..x1).map(move |xx| (y, xx))).map(|(y, xx)| x[(nc * h + y) * w + xx]).collect();
                out.push(if max { vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max) } else { vals.iter().sum::<f64>() / vals.len() as f64 });
            }
        }
    }
    out
}

pub fn adaptive_pools(d: &Device) {
    let cases: [([usize; 4], (usize, usize)); 7] = [
        ([2, 3, 7, 5], (3, 2)),
        ([1, 2, 8, 6], (4, 3)),
        ([1, 2, 8, 5], (4, 3)),
        ([1, 2, 9, 8], (4, 4)),
        ([1, 1, 5, 3], (7, 4)),
        ([2, 3, 6, 6], (1, 1)),
        ([1, 2, 33, 17], (5, 3)),
    ];
    for (shape, out) in cases {
        let (x, xv) = input(d, &shape, 640, DType::F32);
        let sx = strided_input(d, &shape, &xv, DType::F32);
        let oshape = [shape[0], shape[1], out.0, out.1];
        for (max, tag) in [(false, "adaptive_avg_pool2d"), (true, "adaptive_max_pool2d")] {
            let want = ref_adaptive(&xv, shape, out, max);
            let f = |t: &Tensor| if max { t.adaptive_max_pool2d(out) } else { t.adaptive_avg_pool2d(out) };
            let what = format!("{tag} {shape:?} -> {out:?}");
            check(&what, &f(&x), &oshape, &want, 1e-6, 1e-5);
            check(&format!("{what} strided"), &f(&sx), &oshape, &want, 1e-6, 1e-5);
        }
    }
    let (x, xv) = input(d, &[3, 7, 5], 641, DType::F32);
    check("adaptive_avg_pool2d [C, H, W]", &x.adaptive_avg_pool2d((3, 2)), &[3, 3, 2], &ref_adaptive(&xv, [1, 3, 7, 5], (3, 2), false), 1e-6, 1e-5);
    check("adaptive_max_pool2d [C, H, W]", &x.adaptive_max_pool2d((2, 3)), &[3, 2, 3], &ref_adaptive(&xv, [1, 3, 7, 5], (2, 3), true), 0.0, 0.0);
    for r in [x.adaptive_avg_pool2d((0, 2)), x.reshape(&[21, 5]).and_then(|t| t.adaptive_max_pool2d((2, 2)))] {
        let msg = expect_err("adaptive pool bad shape", r);
        assert!(msg.contains("adaptive_") && (msg.contains("[3, 7, 5]") || msg.contains("[21, 5]")), "{msg}");
    }
}
