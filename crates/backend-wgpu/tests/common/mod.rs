//! What every GPU test file shares: the device to run on, or a reason to skip.

// The CPU device: the reference, and where fallbacks run.
use liandan_backend_cpu as _;
use liandan_backend_wgpu::{WgpuBackend, WgpuOptions};
use liandan_tensor::Device;

/// The first GPU, or `None` to skip: [`liandan_tensor::testing::gpu`].
pub fn gpu() -> Option<Device> {
    liandan_tensor::testing::gpu().unwrap_or_else(|e| panic!("{e}"))
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

/// Says on stderr whether `d` runs f16 `ops` on cooperative matrices (tensor cores), so that a
/// pass where it has none is not read as the tensor-core path passing; returns the device's
/// description of its f16 products (`tensor cores ...` where it has them).
#[allow(dead_code)]
pub fn say_f16_path(d: &Device, ops: &str) -> String {
    let path = d.describe().into_iter().find(|(k, _)| k == "f16 matmul").map(|(_, v)| v).unwrap_or_default();
    if path.starts_with("tensor cores") {
        eprintln!("f16 {ops} run on cooperative matrices on {d}: checking that path ({path})");
    } else {
        eprintln!("{d} has no cooperative-matrix f16 kernels ({path}): checking the ordinary f16 {ops} only, the tensor-core path is NOT tested here");
    }
    path
}
