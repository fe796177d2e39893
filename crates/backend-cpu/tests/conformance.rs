//! Runs liandan's backend conformance suite on the CPU backend.

use liandan_backend_cpu as _;

liandan_tensor::conformance_suite!(liandan_tensor::Device::cpu());

/// The fused ops this backend runs as its own kernels (the suite's `fused_*` tests compare
/// them with their composites; this makes sure they are not silently skipped).
#[test]
fn fused_kernels_run_here() {
    use liandan_tensor::{conformance::fused::backend_runs, BatchNormOptions, ConvGeometry, DType, Device, FusedOp, LayerNormOptions};
    let mut ops =
        vec![FusedOp::LstmCell, FusedOp::LstmCellBackward, FusedOp::Gelu, FusedOp::GeluBackward, FusedOp::SoftmaxLastDim, FusedOp::SoftmaxLastDimBackward];
    for (affine, running) in [(true, true), (true, false), (false, true), (false, false)] {
        let o = BatchNormOptions { eps: 1e-5, momentum: 0.1, affine, running };
        ops.extend([FusedOp::BatchNormTrain(o), FusedOp::BatchNormBackward(o)]);
        let l = LayerNormOptions { width: 5, eps: 1e-5, weight: affine, bias: running };
        ops.extend([FusedOp::LayerNorm(l), FusedOp::LayerNormBackward(l)]);
    }
    for op in ops {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            assert!(backend_runs(&Device::cpu(), &op, dtype), "{} in {dtype}", op.name());
        }
    }
    // The convolution in f32 and f64 (halves take the composite), grouped and strided.
    let g = ConvGeometry { n: 3, c: 4, h: 7, w: 6, o: 6, kernel: (3, 3), stride: (2, 1), padding: (1, 1), dilation: (1, 1), groups: 2 };
    for op in [FusedOp::Conv2d(g), FusedOp::Conv2dBackwardInput(g), FusedOp::Conv2dBackwardWeight(g)] {
        for dtype in [DType::F32, DType::F64] {
            assert!(backend_runs(&Device::cpu(), &op, dtype), "{} in {dtype}", op.name());
        }
    }
}
