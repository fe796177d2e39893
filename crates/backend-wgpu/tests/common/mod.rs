//! What every GPU test file shares: the device to run on, or a reason to skip.

// The CPU device: the reference, and where fallbacks run.
use liandan_backend_cpu as _;
use liandan_backend_wgpu::{WgpuBackend, WgpuOptions};
use liandan_tensor::Device;

/// The first GPU wgpu finds. Without one, tests skip (saying why), unless
/// `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.
pub fn gpu() -> Option<Device> {
    match Device::gpus().into_iter().next() {
        Some(d) => Some(d),
        None if liandan_tensor::settings::require_gpu().unwrap_or_else(|e| panic!("{e}")) => {
            panic!("LIANDAN_REQUIRE_GPU is set but wgpu found no adapter: install Mesa's software Vulkan (apt-get install mesa-vulkan-drivers libvulkan1) or run on a machine with a GPU")
        }
        None => {
            eprintln!("skipping: wgpu found no adapter here (install mesa-vulkan-drivers for lavapipe, or set LIANDAN_REQUIRE_GPU=1 to make this a failure)");
            None
        }
    }
}

/// A device of its own on the first GPU's adapter, opened with its options changed by `set`: the
/// knobs a test sets there reach no other test.
#[allow(dead_code)]
pub fn gpu_with(set: impl FnOnce(&mut WgpuOptions)) -> Option<Device> {
    let d = gpu()?;
    let mut options = WgpuBackend::of(&d).expect("a wgpu device").options();
    set(&mut options);
    Some(liandan_backend_wgpu::with_options(&d, options).expect("a wgpu device"))
}
