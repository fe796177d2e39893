//! What the test files share: the devices to run on.

#![allow(dead_code)]

use liandan_nn::Device;

/// The first GPU, or `None` to skip: [`liandan_tensor::testing::gpu`].
pub fn gpu() -> Option<Device> {
    liandan_tensor::testing::gpu().unwrap_or_else(|e| panic!("{e}"))
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
