//! Runs liandan's backend conformance suite, unchanged, on a wgpu adapter: lavapipe in CI, a
//! real GPU where there is one. With no adapter the tests skip, saying why, unless
//! `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.

use liandan_backend_wgpu as _;

mod common;
use common::gpu;

liandan_tensor::conformance_suite!(gpu());

/// The fused ops this backend runs as its own kernels (the suite's `fused_*` tests compare
/// them with their composites; this makes sure they are not silently skipped). f64 takes the
/// composite: Vulkan has no f64 `exp`.
#[test]
fn fused_kernels_run_here() {
    use liandan_tensor::{conformance::fused::backend_runs, BatchNormOptions, DType, FusedOp};
    let Some(d) = gpu() else { return };
    let mut ops = vec![FusedOp::LstmCell, FusedOp::LstmCellBackward, FusedOp::Gelu, FusedOp::GeluBackward];
    for (affine, running) in [(true, true), (true, false), (false, true), (false, false)] {
        let o = BatchNormOptions { eps: 1e-5, momentum: 0.1, affine, running };
        ops.extend([FusedOp::BatchNormTrain(o), FusedOp::BatchNormBackward(o)]);
    }
    for op in ops {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            assert!(backend_runs(&d, &op, dtype), "{} in {dtype}", op.name());
        }
        assert!(!backend_runs(&d, &op, DType::F64), "{} in f64 is left to the composite", op.name());
    }
}

/// The convolution passes run as implicit-GEMM kernels here in every float dtype but f64.
#[test]
fn fused_conv_kernels_run_here() {
    use liandan_tensor::{conformance::fused::backend_runs, conformance::fused_conv, DType};
    let Some(d) = gpu() else { return };
    for op in fused_conv::ops() {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            assert!(backend_runs(&d, &op, dtype), "{} in {dtype}", op.name());
        }
        assert!(!backend_runs(&d, &op, DType::F64), "{} in f64 is left to the composite", op.name());
    }
}

/// The strided input gradients computed the way they were before the phase decomposition (one
/// product over every tap, kept for `xtask bench-conv` and for bisecting) against the composite.
#[test]
fn fused_conv_without_phases_matches_composite() {
    let Some(d) = gpu() else { return };
    liandan_backend_wgpu::without_conv_phases(|| liandan_tensor::conformance::fused_conv::conv2d_strided_matches_composite(&d));
}
