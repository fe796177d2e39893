//! A save that fails halfway through writing leaves the old file and no temporary file.
//!
//! The failure is staged with a device whose read-back fails, as a lost GPU's does. The
//! device is the CPU backend wrapped to fail `to_host`; it lives in its own test file so that a
//! change to the `Backend` trait touches only this one.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use liandan_backend_cpu::CpuBackend;
use liandan_nn::backend::{BinaryOp, CmpOp, ReduceOp, UnaryOp, Window2d};
use liandan_nn::checkpoint::{load, save};
use liandan_nn::Error;
use liandan_nn::{Backend, DType, Device, DeviceKind, Distribution, Storage, Strided, Tensor, TensorResult as Result};

/// The CPU backend, except that nothing can be read back.
#[derive(Debug)]
struct LostDevice(CpuBackend);

#[rustfmt::skip]
impl Backend for LostDevice {
    fn name(&self) -> String { "lost".into() }
    fn kind(&self) -> DeviceKind { DeviceKind::Cpu }
    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage> { self.0.from_host(bytes, dtype) }
    fn to_host(&self, _: Strided) -> Result<Vec<u8>> {
        Err(liandan_nn::TensorError::Backend { backend: "lost".into(), op: "to_host", detail: "device lost (simulated)".into() })
    }
    fn full(&self, n: usize, v: f64, d: DType) -> Result<Storage> { self.0.full(n, v, d) }
    fn random(&self, dist: Distribution, n: usize, s: u64, d: DType) -> Result<Storage> { self.0.random(dist, n, s, d) }
    fn copy(&self, x: Strided) -> Result<Storage> { self.0.copy(x) }
    fn cast(&self, x: Strided, to: DType) -> Result<Storage> { self.0.cast(x, to) }
    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage> { self.0.unary(op, x) }
    fn binary(&self, op: BinaryOp, a: Strided, b: Strided) -> Result<Storage> { self.0.binary(op, a, b) }
    fn compare(&self, op: CmpOp, a: Strided, b: Strided) -> Result<Storage> { self.0.compare(op, a, b) }
    fn select(&self, c: Strided, a: Strided, b: Strided) -> Result<Storage> { self.0.select(c, a, b) }
    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> { self.0.reduce(op, x) }
    fn matmul(&self, a: Strided, b: Strided) -> Result<Storage> { self.0.matmul(a, b) }
    fn im2col(&self, x: Strided, w: Window2d, pad: f64) -> Result<Storage> { self.0.im2col(x, w, pad) }
    fn col2im(&self, x: Strided, w: Window2d) -> Result<Storage> { self.0.col2im(x, w) }
    fn max_pool2d(&self, x: Strided, w: Window2d) -> Result<(Storage, Storage)> { self.0.max_pool2d(x, w) }
    fn avg_pool2d(&self, x: Strided, w: Window2d, p: bool) -> Result<Storage> { self.0.avg_pool2d(x, w, p) }
    fn avg_pool2d_backward(&self, dy: Strided, w: Window2d, p: bool) -> Result<Storage> { self.0.avg_pool2d_backward(dy, w, p) }
    fn gather(&self, s: Strided, i: Strided, d: usize) -> Result<Storage> { self.0.gather(s, i, d) }
    fn scatter_add(&self, t: Strided, i: Strided, s: Strided, d: usize) -> Result<Storage> { self.0.scatter_add(t, i, s, d) }
    fn index_select(&self, s: Strided, i: Strided, d: usize) -> Result<Storage> { self.0.index_select(s, i, d) }
    fn concat(&self, parts: &[Strided], d: usize) -> Result<Storage> { self.0.concat(parts, d) }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn a_save_that_fails_midway_leaves_the_old_file_and_no_temporary() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let cpu = Device::cpu();
    let lost = Device::from_backend(Arc::new(LostDevice(CpuBackend)));
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.safetensors");
    save(&path, &[("a".to_string(), Tensor::ones(&[1000], DType::F32, &cpu)?)], None)?;
    let before = fs::read(&path)?;

    // "a" (on the CPU) is written first, then reading "b" back fails.
    let tensors = vec![("a".to_string(), Tensor::full(&[1000], 2.0, DType::F32, &cpu)?), ("b".to_string(), Tensor::full(&[1000], 3.0, DType::F32, &lost)?)];
    let err = save(&path, &tensors, None).unwrap_err();
    assert!(matches!(err, Error::TensorIn { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("model.safetensors") && msg.contains("`b`") && msg.contains("device lost"), "{msg}");

    assert_eq!(fs::read(&path)?, before, "the old checkpoint was changed");
    assert_eq!(entries(dir.path()), vec!["model.safetensors"], "a temporary file was left behind");
    assert_eq!(load(&path, &cpu)?[0].1.to_vec::<f32>()?, vec![1.0; 1000]);
    Ok(())
}
