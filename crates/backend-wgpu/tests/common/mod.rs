//! What every GPU test file shares: the device to run on, or a reason to skip.

// The CPU device: the reference, and where fallbacks run.
use liandan_backend_cpu as _;
use liandan_tensor::Device;

/// The first GPU wgpu finds. Without one, tests skip (saying why), unless
/// `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.
pub fn gpu() -> Option<Device> {
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
