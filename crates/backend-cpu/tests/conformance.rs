//! Runs liandan's backend conformance suite on the CPU backend.

use liandan_backend_cpu as _;

liandan_tensor::conformance_suite!(liandan_tensor::Device::cpu());

/// The fused ops this backend runs as its own kernels (the suite's `fused_*` tests compare
/// them with their composites; this makes sure they are not silently skipped).
#[test]
fn fused_kernels_run_here() {
    use liandan_tensor::conformance::fused::{kernel_runs, kernel_runs_mixed, mixed_norm_ops, norm_ops, unit_ops};
    use liandan_tensor::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBias, Conv2dBiasRelu};
    use liandan_tensor::{ConvGeometry, CustomOp, DType, Device};
    let d = Device::cpu();
    // Log-softmax runs its composite here: a few cheap passes over a classifier's logits.
    for op in unit_ops().into_iter().chain(norm_ops()).filter(|op| !op.name().starts_with("log_softmax")) {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, &*op, dtype), "{} in {dtype}", op.name());
        }
    }
    // Autocast's batch norm: low activations, f32 parameters and statistics.
    for op in mixed_norm_ops() {
        for low in [DType::F16, DType::BF16] {
            assert!(kernel_runs_mixed(&d, &*op, low), "{} over {low} and f32", op.name());
        }
    }
    // Low products and row sums summed into f32.
    let wide: [&dyn CustomOp; 2] = [&liandan_tensor::ops::MatmulWide, &liandan_tensor::ops::SumRowsWide];
    for op in wide {
        for dtype in [DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, op, dtype), "{} in {dtype}", op.name());
        }
    }
    // A linear layer's product and bias, and max pooling's gradient, in every float type.
    let window = liandan_tensor::backend::Window2d { n: 2, c: 3, h: 7, w: 6, kernel: (2, 2), stride: (2, 2), padding: (0, 0), dilation: (1, 1) };
    let more: [&dyn CustomOp; 2] = [&liandan_tensor::ops::MatmulBias, &liandan_tensor::ops::MaxPool2dBackward(window)];
    for op in more {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, op, dtype), "{} in {dtype}", op.name());
        }
    }
    // A whole LSTM direction each way, in f32 (other types run the steps as ops).
    let sequence: [&dyn CustomOp; 2] =
        [&liandan_tensor::ops::LstmSequence { reverse: true, zero_state: false }, &liandan_tensor::ops::LstmSequenceBackward { reverse: true, want_dh0: true }];
    for op in sequence {
        assert!(kernel_runs(&d, op, DType::F32), "{} in f32", op.name());
    }
    // The convolution in f32 and f64 (halves take the composite), grouped and strided.
    let g = ConvGeometry { n: 3, c: 4, h: 7, w: 6, o: 6, kernel: (3, 3), stride: (2, 1), padding: (1, 1), dilation: (1, 1), groups: 2 };
    let convs: [Box<dyn CustomOp>; 5] =
        [Box::new(Conv2d(g)), Box::new(Conv2dBias(g)), Box::new(Conv2dBiasRelu(g)), Box::new(Conv2dBackwardInput(g)), Box::new(Conv2dBackwardWeight(g))];
    for op in convs {
        for dtype in [DType::F32, DType::F64] {
            assert!(kernel_runs(&d, &*op, dtype), "{} in {dtype}", op.name());
        }
    }
    // The weight gradient of halves summed into f32: the f32 kernel on widened operands.
    for dtype in [DType::F16, DType::BF16] {
        assert!(kernel_runs(&d, &liandan_tensor::ops::Conv2dBackwardWeightWide(g), dtype), "conv2d_backward_weight_wide in {dtype}");
    }
}

/// This backend's own splits, which the suite's small shapes do not reach: GELU over more than
/// one parallel piece, a linear layer's bias added to rows in parallel pieces, and convolutions whose images are multiplied one at a time (L >= 512,
/// padded) or several side by side in blocks that do not divide the batch, with images run in
/// parallel or one block after another (pools of 1, 2 and 4 threads: the plan depends on them).
#[test]
fn fused_kernels_match_composites_past_their_splits() {
    use liandan_tensor::conformance::{fused::check_fused, values};
    use liandan_tensor::{DType, Device, Result, Tensor};
    let d = Device::cpu();
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, &d).unwrap();
    let gelu = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].gelu()?]) };
    check_fused("gelu f32 [3, 70001]", &[t(&[3, 70001], 1).mul_scalar(4.0).unwrap()], gelu, 1e-6, 1e-5);
    // A linear layer whose bias is added to rows in parallel pieces, the last one short.
    let linear = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].linear(&x[1], Some(&x[2]))?]) };
    check_fused("linear f32 [2001, 16] x [40, 16]^T + bias", &[t(&[2001, 16], 4), t(&[40, 16], 5), t(&[40], 6)], linear, 1e-5, 1e-5);
    // (N, C, H, W, O, kernel, stride, padding): one image a product (552 columns); blocks of
    // 36 columns an image; strided; a 1x1 whose columns are the input, in blocks; 100 columns
    // an image, in parallel runs of 7 images on 2 threads (blocks of 6 and 1), and on 4 threads
    // in runs of 4 but for the weight gradient, whose blocks then run one after another (6, 6
    // and 2 images).
    let cases = [(3, 4, 24, 23, 5, 3, 1, 1), (5, 8, 6, 6, 8, 3, 1, 1), (7, 6, 5, 5, 4, 3, 2, 0), (9, 3, 4, 4, 6, 1, 1, 0), (14, 2, 10, 10, 3, 3, 1, 1)];
    for threads in [1, 2, 4] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
        pool.install(|| {
            for (n, c, h, w, o, k, s, p) in cases {
                let conv = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].conv2d(&x[1], None, (s, s), (p, p), (1, 1), 1)?]) };
                let inputs = [t(&[n, c, h, w], 2), t(&[o, c, k, k], 3).mul_scalar(0.5).unwrap()];
                check_fused(&format!("conv2d [{n}, {c}, {h}, {w}] O {o} kernel {k} stride {s} padding {p}, {threads} threads"), &inputs, conv, 1e-4, 1e-4);
            }
        });
    }
}

/// Column sums of f32 (a bias gradient's, in vector lanes four rows a pass) against sums in f64
/// done here: rows that are not a multiple of four, blocks of lanes split over 1, 2 and 4
/// threads, and a middle axis of a 3-D tensor.
#[test]
fn column_sums_match_f64_sums() {
    use liandan_tensor::conformance::values;
    use liandan_tensor::{DType, Device, Tensor};
    let d = Device::cpu();
    for threads in [1, 2, 4] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
        pool.install(|| {
            for shape in [[1usize, 1023, 70], [3, 5, 9], [2, 1792, 1024]] {
                let [outer, len, inner] = shape;
                let v = values(outer * len * inner, 11);
                let x = Tensor::from_f64s(&v, &shape, DType::F32, &d).unwrap();
                let got = x.sum(&[1], false).unwrap().to_vec::<f32>().unwrap();
                // The f32 inputs exactly as stored, summed in f64 in row order, rounded once.
                let want: Vec<f32> =
                    (0..outer * inner).map(|oi| (0..len).map(|j| v[(oi / inner * len + j) * inner + oi % inner] as f32 as f64).sum::<f64>() as f32).collect();
                assert_eq!(got, want, "sum over the middle axis of {shape:?}, {threads} threads");
            }
        });
    }
}
