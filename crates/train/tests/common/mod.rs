//! What the test files share: the devices to run on.

#![allow(dead_code)]

use liandan_nn::Device;

/// The first GPU wgpu finds. Without one, GPU tests skip (saying why), unless
/// `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.
pub fn gpu() -> Option<Device> {
    match Device::gpus().into_iter().next() {
        Some(d) => Some(d),
        None if liandan_tensor::settings::require_gpu().unwrap_or_else(|e| panic!("{e}")) => {
            panic!("LIANDAN_REQUIRE_GPU is set but wgpu found no adapter: install Mesa's software Vulkan (apt-get install mesa-vulkan-drivers libvulkan1) or run on a machine with a GPU")
        }
        None => {
            eprintln!(
                "skipping the GPU: wgpu found no adapter here (install mesa-vulkan-drivers for lavapipe, or set LIANDAN_REQUIRE_GPU=1 to make this a failure)"
            );
            None
        }
    }
}

/// The CPU, and the GPU when there is one.
pub fn devices() -> Vec<Device> {
    let mut all = vec![Device::cpu()];
    all.extend(gpu());
    all
}

/// Seeded values in [-1, 1), never all zero.
pub fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}
