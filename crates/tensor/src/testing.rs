//! Hooks for this workspace's tests, not for programs: the GPU a test runs on, or why it skips.

use crate::device::Device;
use crate::error::{Error, Result};

/// The first GPU registered (lavapipe counts). Without one, `Ok(None)` after saying on stderr
/// that the GPU part is skipped, unless `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in
/// which case the missing GPU is an error, so that the test fails instead.
pub fn gpu() -> Result<Option<Device>> {
    if let Some(d) = Device::gpus().into_iter().next() {
        return Ok(Some(d));
    }
    if crate::settings::require_gpu()? {
        return Err(Error::Device(
            "LIANDAN_REQUIRE_GPU is set but no GPU adapter was found: install Mesa's software Vulkan (apt-get install mesa-vulkan-drivers libvulkan1) or run on a machine with a GPU".into(),
        ));
    }
    eprintln!("skipping the GPU: no adapter here (install mesa-vulkan-drivers for lavapipe, or set LIANDAN_REQUIRE_GPU=1 to make this a failure)");
    Ok(None)
}
