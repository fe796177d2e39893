//! The profiler's conformance check on a wgpu adapter (lavapipe in CI), alone in this binary:
//! a profiling session records every thread's calls.

use liandan_backend_wgpu as _;

mod common;

#[test]
fn profile_counts_calls_exactly_and_changes_nothing() {
    let Some(d) = common::gpu() else { return };
    liandan_tensor::conformance::profile::check_profile(&d);
}
