//! Gradient checks of the sliding-window ops: im2col and col2im (adjoints of each other),
//! the convolutions through them (conv2d, conv1d, conv_transpose2d), and pooling (max,
//! average, adaptive).

use super::grads::{check_grads, leaf, strided_leaf};
use crate::Device;

pub fn im2col(d: &Device) {
    let x = leaf(d, &[1, 2, 5, 6], 1);
    check_grads("im2col stride/padding/dilation", &[x], |x| x[0].im2col((2, 3), (2, 1), (1, 1), (1, 2)), 1e-7, 1e-6);
    // Overlapping 3x3 windows: each input element feeds up to 9 columns.
    let x = strided_leaf(d, &[2, 3, 4, 5], 2);
    check_grads("im2col overlapping, strided", &[x], |x| x[0].im2col((3, 3), (1, 1), (1, 1), (1, 1)), 1e-7, 1e-6);
}

pub fn col2im(d: &Device) {
    // Output (5, 6) with these windows gives 3 x 4 = 12 columns of C * 2 * 3 = 12 rows.
    let cols = leaf(d, &[1, 12, 12], 3);
    check_grads("col2im stride/padding/dilation", &[cols], |x| x[0].col2im((5, 6), (2, 3), (2, 1), (1, 1), (1, 2)), 1e-7, 1e-6);
    // Overlapping 3x3 windows summed back into a 4 x 4 image.
    let cols = strided_leaf(d, &[2, 9, 16], 4);
    check_grads("col2im overlapping, strided", &[cols], |x| x[0].col2im((4, 4), (3, 3), (1, 1), (1, 1), (1, 1))?.square(), 1e-6, 1e-6);
}

pub fn conv2d(d: &Device) {
    // Stride 2, padding 1, dilation 2, 2 groups: [2, 4, 5, 6] * [6, 2, 3, 3] -> [2, 6, 2, 2].
    let (x, w, b) = (leaf(d, &[2, 4, 5, 6], 5), leaf(d, &[6, 2, 3, 3], 6), leaf(d, &[6], 7));
    check_grads("conv2d s2 p1 d2 g2", &[x, w, b], |x| x[0].conv2d(&x[1], Some(&x[2]), (2, 2), (1, 1), (2, 2), 2), 1e-6, 1e-6);
    let (x, w, b) = (strided_leaf(d, &[1, 3, 7, 6], 8), strided_leaf(d, &[4, 3, 2, 3], 9), leaf(d, &[4], 10));
    check_grads("conv2d strided, uneven stride/padding", &[x, w, b], |x| x[0].conv2d(&x[1], Some(&x[2]), (1, 2), (0, 1), (1, 1), 1), 1e-6, 1e-6);
    let (x, w) = (leaf(d, &[1, 1, 7, 7], 11), leaf(d, &[1, 1, 3, 3], 12));
    check_grads("conv2d no bias", &[x, w], |x| x[0].conv2d(&x[1], None, (1, 1), (1, 1), (1, 1), 1), 1e-6, 1e-6);
}

pub fn max_pool2d(d: &Device) {
    // Stride < kernel: windows overlap, so an element may win several windows. Seeded values
    // have no ties, and padding never wins (each window holds at least one real element).
    let x = leaf(d, &[1, 2, 7, 7], 13);
    check_grads("max_pool2d k3 s2 p1", &[x], |x| x[0].max_pool2d((3, 3), (2, 2), (1, 1), (1, 1)), 1e-7, 1e-6);
    let x = strided_leaf(d, &[2, 1, 6, 5], 14);
    check_grads("max_pool2d strided, dilated", &[x], |x| x[0].max_pool2d((2, 3), (1, 1), (0, 1), (2, 1)), 1e-7, 1e-6);
}

pub fn avg_pool2d(d: &Device) {
    for cip in [true, false] {
        let x = leaf(d, &[2, 3, 6, 5], 15);
        check_grads(&format!("avg_pool2d padded, count_include_pad {cip}"), &[x], |x| x[0].avg_pool2d((3, 2), (2, 1), (1, 1), cip), 1e-7, 1e-6);
        let x = strided_leaf(d, &[1, 2, 7, 7], 16);
        check_grads(&format!("avg_pool2d strided, count_include_pad {cip}"), &[x], |x| x[0].avg_pool2d((3, 3), (2, 2), (1, 1), cip), 1e-7, 1e-6);
    }
}

/// `avg_pool2d_backward` is linear in the output gradient; its own gradient is average pooling.
pub fn avg_pool2d_backward(d: &Device) {
    for cip in [true, false] {
        let dy = leaf(d, &[2, 3, 3, 6], 17);
        check_grads(
            &format!("avg_pool2d_backward, count_include_pad {cip}"),
            &[dy],
            |x| x[0].avg_pool2d_backward(&[2, 3, 6, 5], (3, 2), (2, 1), (1, 1), cip),
            1e-7,
            1e-6,
        );
        let dy = strided_leaf(d, &[1, 2, 4, 4], 18);
        check_grads(
            &format!("avg_pool2d_backward strided, count_include_pad {cip}"),
            &[dy],
            |x| x[0].avg_pool2d_backward(&[1, 2, 7, 7], (3, 3), (2, 2), (1, 1), cip)?.square(),
            1e-7,
            1e-6,
        );
    }
}

pub fn conv1d(d: &Device) {
    let (x, w, b) = (leaf(d, &[2, 4, 9], 1), leaf(d, &[6, 2, 3], 2), leaf(d, &[6], 3));
    check_grads("conv1d s2 p1 d2 g2", &[x, w, b], |x| x[0].conv1d(&x[1], Some(&x[2]), 2, 1, 2, 2), 1e-6, 1e-6);
    let (x, w) = (strided_leaf(d, &[1, 3, 7], 4), strided_leaf(d, &[2, 3, 4], 5));
    check_grads("conv1d strided, no bias", &[x, w], |x| x[0].conv1d(&x[1], None, 1, 2, 1, 1), 1e-6, 1e-6);
}

pub fn conv_transpose2d(d: &Device) {
    // Stride 2, padding 1, output_padding 1, 2 groups: [2, 4, 3, 3] -> [2, 6, 6, 6].
    let (x, w, b) = (leaf(d, &[2, 4, 3, 3], 6), leaf(d, &[4, 3, 3, 3], 7), leaf(d, &[6], 8));
    check_grads("conv_transpose2d s2 p1 op1 g2", &[x, w, b], |x| x[0].conv_transpose2d(&x[1], Some(&x[2]), (2, 2), (1, 1), (1, 1), (1, 1), 2), 1e-6, 1e-6);
    let (x, w) = (strided_leaf(d, &[1, 2, 4, 3], 9), strided_leaf(d, &[2, 3, 2, 3], 10));
    check_grads("conv_transpose2d strided, dilated, uneven", &[x, w], |x| x[0].conv_transpose2d(&x[1], None, (1, 2), (0, 1), (1, 1), (2, 1), 1), 1e-6, 1e-6);
}

pub fn adaptive_pools(d: &Device) {
    // 7x5 -> 3x2: overlapping, uneven bins on both axes; 6x4 -> 3x2 takes the pooling fast path.
    for (shape, out) in [([2usize, 2, 7, 5], (3usize, 2usize)), ([1, 3, 6, 4], (3, 2)), ([1, 2, 6, 5], (3, 4))] {
        check_grads(&format!("adaptive_avg_pool2d {shape:?} -> {out:?}"), &[leaf(d, &shape, 11)], |x| x[0].adaptive_avg_pool2d(out), 1e-7, 1e-6);
        // Seeded values have no ties, so each bin's maximum is unique.
        check_grads(&format!("adaptive_max_pool2d {shape:?} -> {out:?}"), &[strided_leaf(d, &shape, 12)], |x| x[0].adaptive_max_pool2d(out), 1e-7, 1e-6);
    }
}
