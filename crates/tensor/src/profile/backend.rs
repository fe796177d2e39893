//! The recording wrapper a [`Device`](crate::Device) hands out while a profiling session runs:
//! every kernel-trait method is forwarded to the real backend, timed and named.
//!
//! Every method of [`Backend`] is forwarded here, the provided ones too (a method left to its
//! default would change what a profiled program computes): a method added to the trait must be
//! added here.

use std::borrow::Cow;
use std::sync::Arc;

use super::record;
use crate::backend::{Backend, BinaryOp, CmpOp, DeviceKind, Distribution, MemoryStats, ReduceOp, Storage, Strided, UnaryOp, Window2d};
use crate::{DType, FusedOp, Result};

#[derive(Debug)]
pub(crate) struct Profiled {
    inner: Arc<dyn Backend>,
}

impl Profiled {
    pub(crate) fn new(inner: Arc<dyn Backend>) -> Profiled {
        Profiled { inner }
    }

    fn run<T>(&self, name: &'static str, call: impl FnOnce(&dyn Backend) -> T) -> T {
        record(&self.inner, || Cow::Borrowed(name), || call(&*self.inner), |_| true)
    }

    /// An op named by its variant, lower-cased as PyTorch names them (`exp`, `add`, `argmax`).
    fn run_named<T>(&self, op: impl std::fmt::Debug, call: impl FnOnce(&dyn Backend) -> T) -> T {
        record(&self.inner, || Cow::Owned(format!("{op:?}").to_lowercase()), || call(&*self.inner), |_| true)
    }
}

impl Backend for Profiled {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn kind(&self) -> DeviceKind {
        self.inner.kind()
    }

    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
        self.run("from_host", |b| b.from_host(bytes, dtype))
    }

    fn to_host(&self, src: Strided) -> Result<Vec<u8>> {
        self.run("to_host", |b| b.to_host(src))
    }

    fn full(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        self.run("full", |b| b.full(numel, value, dtype))
    }

    fn random(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        self.run("random", |b| b.random(dist, numel, seed, dtype))
    }

    fn copy(&self, src: Strided) -> Result<Storage> {
        self.run("copy", |b| b.copy(src))
    }

    fn cast(&self, src: Strided, to: DType) -> Result<Storage> {
        self.run("cast", |b| b.cast(src, to))
    }

    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        self.run_named(op, |b| b.unary(op, x))
    }

    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.run_named(op, |b| b.binary(op, lhs, rhs))
    }

    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.run_named(op, |b| b.compare(op, lhs, rhs))
    }

    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        self.run("select", |b| b.select(cond, on_true, on_false))
    }

    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        self.run_named(op, |b| b.reduce(op, x))
    }

    fn matmul(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.run("matmul", |b| b.matmul(lhs, rhs))
    }

    fn im2col(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage> {
        self.run("im2col", |b| b.im2col(x, window, pad_value))
    }

    fn col2im(&self, cols: Strided, window: Window2d) -> Result<Storage> {
        self.run("col2im", |b| b.col2im(cols, window))
    }

    fn max_pool2d(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)> {
        self.run("max_pool2d", |b| b.max_pool2d(x, window))
    }

    fn avg_pool2d(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.run("avg_pool2d", |b| b.avg_pool2d(x, window, count_include_pad))
    }

    fn avg_pool2d_backward(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.run("avg_pool2d_backward", |b| b.avg_pool2d_backward(dy, window, count_include_pad))
    }

    fn gather(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.run("gather", |b| b.gather(src, index, dim))
    }

    fn scatter_add(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage> {
        self.run("scatter_add", |b| b.scatter_add(dst, index, src, dim))
    }

    fn index_select(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.run("index_select", |b| b.index_select(src, index, dim))
    }

    fn concat(&self, parts: &[Strided], dim: usize) -> Result<Storage> {
        self.run("concat", |b| b.concat(parts, dim))
    }

    fn fused(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        // Only a fused kernel that runs is a call; a `None` lets the composite's ops be recorded.
        record(&self.inner, || Cow::Owned(format!("fused {}", op.name())), || self.inner.fused(op, inputs), Option::is_some)
    }

    fn fused_foreach(&self, op: &FusedOp, lists: &[Vec<Strided>]) -> Option<Result<Vec<Vec<Storage>>>> {
        record(&self.inner, || Cow::Owned(format!("fused {} foreach", op.name())), || self.inner.fused_foreach(op, lists), Option::is_some)
    }

    fn fused_foreach_in_place(&self, op: &FusedOp, lists: &[Vec<Strided>]) -> Option<Result<()>> {
        record(&self.inner, || Cow::Owned(format!("fused {} foreach", op.name())), || self.inner.fused_foreach_in_place(op, lists), Option::is_some)
    }

    fn synchronize(&self) -> Result<()> {
        self.run("synchronize", |b| b.synchronize())
    }

    fn memory_stats(&self) -> Option<MemoryStats> {
        self.inner.memory_stats()
    }

    fn empty_cache(&self) {
        self.inner.empty_cache()
    }

    fn set_memory_budget(&self, bytes: Option<u64>) -> bool {
        self.inner.set_memory_budget(bytes)
    }

    fn reset_peak_memory(&self) {
        self.inner.reset_peak_memory()
    }

    fn memory_breakdown(&self) -> Option<String> {
        self.inner.memory_breakdown()
    }

    fn fallback_report(&self) -> Vec<(String, u64)> {
        self.inner.fallback_report()
    }

    fn describe(&self) -> Vec<(String, String)> {
        self.inner.describe()
    }
}
