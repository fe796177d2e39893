//! Runs liandan's backend conformance suite, unchanged, on a wgpu adapter: lavapipe in CI, a
//! real GPU where there is one. With no adapter the tests skip, saying why, unless
//! `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.

use liandan_backend_wgpu as _;

mod common;
use common::gpu;

liandan_tensor::conformance_suite!(gpu());
