//! The profiler's conformance check on the CPU backend (alone in this binary: a profiling
//! session records every thread's calls).

use liandan_backend_cpu as _;

#[test]
fn profile_counts_calls_exactly_and_changes_nothing() {
    liandan_tensor::conformance::profile::check_profile(&liandan_tensor::Device::cpu());
}
