//! What the nn test files share: the devices to run on, and tensors from fixture files.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use liandan_nn::{checkpoint, Device, Tensor};

/// The first GPU (lavapipe counts), or `None` to skip: [`liandan_tensor::testing::gpu`].
pub fn gpu() -> Option<Device> {
    liandan_tensor::testing::gpu().unwrap_or_else(|e| panic!("{e}"))
}

/// The CPU, then the GPU when there is one.
pub fn devices() -> Vec<Device> {
    std::iter::once(Device::cpu()).chain(gpu()).collect()
}

/// `crates/nn/tests/data/<name>`: under the crate this test was built from, or, for a test
/// binary copied to another machine, under `crates/nn/tests/data` of the working directory.
pub fn data_path(name: &str) -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("data");
    let dir = if built.is_dir() { built } else { PathBuf::from("crates/nn/tests/data") };
    dir.join(name)
}

/// Every tensor of the fixture file `tests/data/<name>`, on `device`, by name.
pub fn fixture(name: &str, device: &Device) -> HashMap<String, Tensor> {
    let path = data_path(name);
    checkpoint::load(&path, device).unwrap_or_else(|e| panic!("{}: {e}", path.display())).into_iter().collect()
}

/// `max |a - b| / max(max |b|, floor)`: the error relative to the reference's scale, which stays
/// meaningful where individual reference elements are near zero.
pub fn rel_err(got: &Tensor, want: &Tensor, floor: f64) -> f64 {
    assert_eq!(got.shape(), want.shape(), "shapes differ");
    let (a, b) = (got.to_vec_f64().unwrap(), want.to_vec_f64().unwrap());
    let scale = b.iter().fold(floor, |m, v| m.max(v.abs()));
    a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale
}
