//! Runs liandan's backend conformance suite, unchanged, on a wgpu adapter: lavapipe in CI, a
//! real GPU where there is one. With no adapter the tests skip, saying why, unless
//! `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.

use liandan_backend_wgpu as _;
use liandan_tensor::Device;

fn gpu() -> Option<Device> {
    match Device::gpus().into_iter().next() {
        Some(d) => Some(d),
        None if std::env::var("LIANDAN_REQUIRE_GPU").is_ok_and(|v| v != "0") => {
            panic!("LIANDAN_REQUIRE_GPU is set but wgpu found no adapter: install Mesa's software Vulkan (apt-get install mesa-vulkan-drivers libvulkan1) or run on a machine with a GPU")
        }
        None => {
            eprintln!("skipping: wgpu found no adapter here (install mesa-vulkan-drivers for lavapipe, or set LIANDAN_REQUIRE_GPU=1 to make this a failure)");
            None
        }
    }
}

liandan_tensor::conformance_suite!(gpu());
