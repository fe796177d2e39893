//! A convolution's weight gradient against its definition, for groups of few output channels
//! (summed transposed, then transposed into place) and of many, or of fewer weights a channel
//! than channels (summed as they are), with and without groups, padding and stride, on one
//! image and on several.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Tensor};

/// dW[o, c, i, j] = sum over n, y, x of dy[n, o, y, x] * input[n, g(o) * cg + c, y s + i - p, x s + j - p].
#[allow(clippy::too_many_arguments)]
fn naive(x: &[f64], dy: &[f64], [n, c, h, w]: [usize; 4], [o, kh, kw]: [usize; 3], s: usize, p: usize, groups: usize, [oh, ow]: [usize; 2]) -> Vec<f64> {
    let (cg, og) = (c / groups, o / groups);
    let mut dw = vec![0.0; o * cg * kh * kw];
    for oc in 0..o {
        let g = oc / og;
        for ci in 0..cg {
            for i in 0..kh {
                for j in 0..kw {
                    let mut sum = 0.0;
                    for b in 0..n {
                        for y in 0..oh {
                            for xo in 0..ow {
                                let (iy, ix) = ((y * s + i) as isize - p as isize, (xo * s + j) as isize - p as isize);
                                if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                                    continue;
                                }
                                let xi = ((b * c + g * cg + ci) * h + iy as usize) * w + ix as usize;
                                sum += dy[((b * o + oc) * oh + y) * ow + xo] * x[xi];
                            }
                        }
                    }
                    dw[((oc * cg + ci) * kh + i) * kw + j] = sum;
                }
            }
        }
    }
    dw
}

#[test]
fn weight_gradients_of_few_and_many_output_channels_match_the_definition() {
    let d = Device::cpu();
    // (batch, in, out, size, stride, padding, groups)
    // The second has 288 rows of dW^T, transposed in two runs.
    for (n, c, o, hw, s, p, groups) in [(3, 4, 6, 7, 1, 1, 1), (2, 32, 8, 4, 1, 1, 1), (1, 3, 300, 5, 2, 0, 1), (2, 4, 520, 6, 1, 1, 2), (4, 6, 12, 9, 2, 1, 3)]
    {
        let x = Tensor::randn(&[n, c, hw, hw], 1, DType::F32, &d).unwrap();
        let wt = Tensor::randn(&[o, c / groups, 3, 3], 2, DType::F32, &d).unwrap().requires_grad_(true).unwrap();
        let y = x.conv2d(&wt, None, (s, s), (p, p), (1, 1), groups).unwrap();
        let (oh, ow) = (y.shape()[2], y.shape()[3]);
        let dy = Tensor::randn(y.shape(), 3, DType::F32, &d).unwrap();
        y.mul(&dy).unwrap().sum_all().unwrap().backward().unwrap();
        let got = wt.grad().unwrap().to_vec_f64().unwrap();
        let want = naive(&x.to_vec_f64().unwrap(), &dy.to_vec_f64().unwrap(), [n, c, hw, hw], [o, 3, 3], s, p, groups, [oh, ow]);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "out {o}, groups {groups}: element {k} is {g}, not {w}");
        }
    }
}
