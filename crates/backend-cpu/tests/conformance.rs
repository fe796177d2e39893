//! Runs liandan's backend conformance suite on the CPU backend.

use liandan_backend_cpu as _;

liandan_tensor::conformance_suite!(liandan_tensor::Device::cpu());

/// The fused ops this backend runs as its own kernels (the suite's `fused_*` tests compare
/// them with their composites; this makes sure they are not silently skipped).
#[test]
fn fused_kernels_run_here() {
    use liandan_tensor::{conformance::fused::backend_runs, DType, Device, FusedOp};
    for op in [FusedOp::LstmCell, FusedOp::LstmCellBackward, FusedOp::Gelu, FusedOp::GeluBackward] {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            assert!(backend_runs(&Device::cpu(), &op, dtype), "{} in {dtype}", op.name());
        }
    }
}
