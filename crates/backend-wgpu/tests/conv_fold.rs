//! f32 input gradients through a column buffer (`plan/fold.rs`): the weights transposed times
//! dy, folded into dx, against the CPU's direct convolution within 4 f32 epsilons times the
//! terms summed times the sum of |dy||w| of each element, and unlike the implicit GEMM of the
//! same pass in the last bits somewhere (so the fold ran). Cases: unpadded (the rule's),
//! padded, strided, dilated, 1x1 and 5x5 kernels, rectangular ones, several images, w at an
//! offset in its buffer. Skips without an adapter unless `LIANDAN_REQUIRE_GPU` is set.

use liandan_tensor::{DType, Device, Tensor};

mod common;

type Geometry = ((usize, usize), (usize, usize), (usize, usize), (usize, usize));

/// dx of `sum(conv(x, w) * g)`.
fn input_gradient(x: &Tensor, w: &Tensor, g: &Tensor, (_, s, p, d): Geometry) -> Tensor {
    let x = x.detach();
    x.set_requires_grad(true).unwrap();
    x.conv2d(&w.detach(), None, s, p, d, 1).unwrap().mul(g).unwrap().sum_all().unwrap().backward().unwrap();
    x.grad().unwrap()
}

/// Checks one case on `fold` (a device that folds every input gradient it can) against the
/// CPU; returns whether its result differs anywhere from the implicit GEMM's (on `direct`).
fn case([fold, direct]: [&Device; 2], x_shape: [usize; 4], o: usize, geometry: Geometry) -> bool {
    let cpu = Device::cpu();
    let [n, c, h, w] = x_shape;
    let (k, ..) = geometry;
    let seed = (c * 17 + o * 3 + h * 5 + w + k.0) as u64;
    let x = Tensor::randn(&[n, c, h, w], seed, DType::F32, &cpu).unwrap();
    // w lives one kernel into a larger tensor: a contiguous view at an offset.
    let wb = Tensor::randn(&[o + 1, c, k.0, k.1], seed + 1, DType::F32, &cpu).unwrap().mul_scalar(0.2).unwrap();
    let cw = wb.narrow(0, 1, o).unwrap();
    let y_shape = x.conv2d(&cw, None, geometry.1, geometry.2, geometry.3, 1).unwrap().shape().to_vec();
    let g = Tensor::randn(&y_shape, seed + 2, DType::F32, &cpu).unwrap();
    let want = input_gradient(&x, &cw, &g, geometry);
    let abs = |t: &Tensor| t.abs().unwrap();
    let bound = input_gradient(&x, &abs(&cw.contiguous().unwrap()), &abs(&g), geometry);
    let on = |dev: &Device| {
        let on = |t: &Tensor| t.to_device(dev).unwrap();
        input_gradient(&on(&x), &on(&wb).narrow(0, 1, o).unwrap(), &on(&g), geometry)
    };
    let (got, direct) = (on(fold), on(direct));
    let what = format!("folded input gradient of conv2d x {x_shape:?}, {o} outputs, (kernel, stride, padding, dilation) {geometry:?}");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let tol = 4.0 * f32::EPSILON as f64 * (o * k.0 * k.1) as f64;
    let (got, want, bound, direct) = (got.to_vec_f64().unwrap(), want.to_vec_f64().unwrap(), bound.to_vec_f64().unwrap(), direct.to_vec_f64().unwrap());
    for (e, ((g, w), b)) in got.iter().zip(&want).zip(&bound).enumerate() {
        assert!((g - w).abs() <= tol * b, "{what}: element {e}: got {g}, want {w} (|dy||w| summed: {b})");
    }
    got != direct
}

#[test]
fn folded_input_gradient_matches_cpu() {
    let devices = [Some(true), Some(false)].map(|on| common::gpu_with(|o| o.testing.conv_fold = on));
    let [Some(fold), Some(direct)] = &devices else { return };
    let cases: [([usize; 4], usize, Geometry); 8] = [
        // Unpadded, as the rule takes them (seed003_cnn's second convolution, smaller).
        ([2, 16, 13, 13], 32, ((3, 3), (1, 1), (0, 0), (1, 1))),
        ([2, 5, 7, 9], 3, ((3, 3), (1, 1), (0, 0), (1, 1))),
        ([1, 3, 5, 5], 4, ((3, 3), (1, 1), (1, 1), (1, 1))),
        // Strided, rectangular, padded on one axis: pixels no tap reaches get zeros.
        ([2, 4, 9, 8], 6, ((3, 2), (2, 1), (1, 0), (1, 1))),
        ([1, 3, 7, 7], 2, ((5, 5), (3, 3), (2, 2), (1, 1))),
        ([1, 2, 10, 10], 3, ((3, 3), (1, 1), (2, 2), (2, 2))),
        ([3, 6, 4, 4], 5, ((1, 1), (1, 1), (0, 0), (1, 1))),
        // More columns than one 128 x 128 tile holds on either side.
        ([3, 20, 12, 12], 130, ((3, 3), (1, 1), (0, 0), (1, 1))),
    ];
    let mut differs = false;
    for (x, o, g) in cases {
        differs |= case([fold, direct], x, o, g);
    }
    assert!(differs, "the folded input gradients equal the implicit GEMM's to the bit: the fold did not run");
}
