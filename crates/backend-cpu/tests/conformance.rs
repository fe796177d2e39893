//! Runs liandan's backend conformance suite on the CPU backend.

use liandan_backend_cpu as _;

liandan_tensor::conformance_suite!(liandan_tensor::Device::cpu());
