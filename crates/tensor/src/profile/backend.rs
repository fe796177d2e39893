//! The recording wrapper a [`Device`](crate::Device) hands out while a profiling session runs:
//! every kernel-trait method is forwarded to the real backend, timed and named.
//!
//! Every method of [`Backend`] is forwarded here, the provided ones too (a method left to its
//! default would change what a profiled program computes): a method added to the trait must be
//! added here.

use std::borrow::Cow;
use std::sync::Arc;

use super::{record, Inputs};
use crate::backend::{Backend, BinaryOp, CmpOp, CustomKernel, DeviceKind, Distribution, MemoryStats, ReduceOp, Storage, Strided, UnaryOp, Window2d};
use crate::{DType, Result};

#[derive(Debug)]
pub(crate) struct Profiled {
    inner: Arc<dyn Backend>,
}

impl Profiled {
    pub(crate) fn new(inner: Arc<dyn Backend>) -> Profiled {
        Profiled { inner }
    }

    fn run<T>(&self, name: &'static str, inputs: &[Strided], call: impl FnOnce(&dyn Backend) -> T) -> T {
        record(&self.inner, || Cow::Borrowed(name), || shapes(inputs, None), || call(&*self.inner), |_| true)
    }

    /// An op named by its variant, lower-cased as PyTorch names them (`exp`, `add`, `argmax`).
    fn run_named<T>(&self, op: impl std::fmt::Debug, inputs: &[Strided], call: impl FnOnce(&dyn Backend) -> T) -> T {
        record(&self.inner, || Cow::Owned(format!("{op:?}").to_lowercase()), || shapes(inputs, None), || call(&*self.inner), |_| true)
    }
}

/// The inputs' shapes and dtypes (`[128, 64, 32, 32] f32, [64, 64, 3, 3] f32`), then `extra`
/// (a convolution's stride and padding), and `flops`.
fn shapes(inputs: &[Strided], extra: Option<String>) -> Inputs {
    let mut s: Vec<String> = inputs.iter().map(|x| format!("{:?} {}", x.layout.shape(), x.dtype)).collect();
    s.extend(extra);
    Inputs { shapes: s.join(", "), flops: None }
}

/// A batched product's floating-point operations: `2 m k n` per output matrix, the batch
/// dimensions broadcast as `matmul` broadcasts them.
fn matmul_flops(lhs: &[usize], rhs: &[usize]) -> Option<u64> {
    let (&[.., m, k], &[.., k2, n]) = (lhs, rhs) else { return None };
    if k != k2 {
        return None;
    }
    let (lb, rb) = (&lhs[..lhs.len() - 2], &rhs[..rhs.len() - 2]);
    let dims = lb.len().max(rb.len());
    let at = |b: &[usize], i: usize| if i + b.len() >= dims { b[i + b.len() - dims] } else { 1 };
    let batch: usize = (0..dims).map(|i| at(lb, i).max(at(rb, i))).product();
    Some(2 * (batch * m * k * n) as u64)
}

/// Inputs listed one by one past this many are told by count (a multi-tensor optimizer
/// update takes dozens).
const LISTED: usize = 16;

/// What one custom op call's inputs are: their shapes (or, past [`LISTED`], their count and
/// elements), what the op adds (a convolution's stride and padding), and its floating-point
/// operations.
fn custom_inputs(op: &dyn CustomKernel, inputs: &[Strided]) -> Inputs {
    let flops = op.flops(inputs);
    if inputs.len() > LISTED {
        let elements: usize = inputs.iter().map(|x| x.layout.numel()).sum();
        return Inputs { shapes: format!("{} inputs ({elements} elements)", inputs.len()), flops };
    }
    Inputs { flops, ..shapes(inputs, op.detail()) }
}

impl Backend for Profiled {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn kind(&self) -> DeviceKind {
        self.inner.kind()
    }

    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
        self.run("from_host", &[], |b| b.from_host(bytes, dtype))
    }

    fn to_host(&self, src: Strided) -> Result<Vec<u8>> {
        self.run("to_host", &[src], |b| b.to_host(src))
    }

    fn to_host_later(&self, src: Strided) -> Result<Box<dyn crate::backend::HostRead>> {
        self.run("to_host_later", &[src], |b| b.to_host_later(src))
    }

    fn full(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        self.run("full", &[], |b| b.full(numel, value, dtype))
    }

    fn random(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        self.run("random", &[], |b| b.random(dist, numel, seed, dtype))
    }

    fn copy(&self, src: Strided) -> Result<Storage> {
        self.run("copy", &[src], |b| b.copy(src))
    }

    fn cast(&self, src: Strided, to: DType) -> Result<Storage> {
        self.run("cast", &[src], |b| b.cast(src, to))
    }

    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        self.run_named(op, &[x], |b| b.unary(op, x))
    }

    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.run_named(op, &[lhs, rhs], |b| b.binary(op, lhs, rhs))
    }

    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.run_named(op, &[lhs, rhs], |b| b.compare(op, lhs, rhs))
    }

    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        self.run("select", &[cond, on_true, on_false], |b| b.select(cond, on_true, on_false))
    }

    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        self.run_named(op, &[x], |b| b.reduce(op, x))
    }

    fn matmul(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        let inputs = || Inputs { flops: matmul_flops(lhs.layout.shape(), rhs.layout.shape()), ..shapes(&[lhs, rhs], None) };
        record(&self.inner, || Cow::Borrowed("matmul"), inputs, || self.inner.matmul(lhs, rhs), |_| true)
    }

    fn im2col(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage> {
        self.run("im2col", &[x], |b| b.im2col(x, window, pad_value))
    }

    fn col2im(&self, cols: Strided, window: Window2d) -> Result<Storage> {
        self.run("col2im", &[cols], |b| b.col2im(cols, window))
    }

    fn max_pool2d(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)> {
        self.run("max_pool2d", &[x], |b| b.max_pool2d(x, window))
    }

    fn avg_pool2d(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.run("avg_pool2d", &[x], |b| b.avg_pool2d(x, window, count_include_pad))
    }

    fn avg_pool2d_backward(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.run("avg_pool2d_backward", &[dy], |b| b.avg_pool2d_backward(dy, window, count_include_pad))
    }

    fn gather(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.run("gather", &[src, index], |b| b.gather(src, index, dim))
    }

    fn scatter_add(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage> {
        self.run("scatter_add", &[dst, index, src], |b| b.scatter_add(dst, index, src, dim))
    }

    fn index_select(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.run("index_select", &[src, index], |b| b.index_select(src, index, dim))
    }

    fn concat(&self, parts: &[Strided], dim: usize) -> Result<Storage> {
        self.run("concat", parts, |b| b.concat(parts, dim))
    }

    fn custom(&self, op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        // Only a kernel that runs is a call; a `None` lets the composite's ops be recorded.
        record(&self.inner, || Cow::Owned(format!("fused {}", op.name())), || custom_inputs(op, inputs), || self.inner.custom(op, inputs), Option::is_some)
    }

    fn synchronize(&self) -> Result<()> {
        self.run("synchronize", &[], |b| b.synchronize())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ConvGeometry;
    use crate::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Relu};

    #[test]
    fn products_count_twice_their_multiply_adds_over_the_broadcast_batch() {
        assert_eq!(matmul_flops(&[64, 256], &[256, 1024]), Some(2 * 64 * 256 * 1024));
        assert_eq!(matmul_flops(&[8, 4, 3], &[3, 5]), Some(2 * 8 * 4 * 3 * 5));
        // [2, 1] against [1, 3] batch dimensions broadcast to [2, 3].
        assert_eq!(matmul_flops(&[2, 1, 4, 3], &[1, 3, 3, 5]), Some(2 * 6 * 4 * 3 * 5));
        assert_eq!(matmul_flops(&[4, 3], &[2, 5]), None, "inner dimensions differ");
        assert_eq!(matmul_flops(&[3], &[3, 5]), None, "a vector is not a product's operand here");
    }

    #[test]
    fn a_convolution_counts_its_output_times_its_window() {
        // resnet18's layer2 entry: 64 -> 128 channels, 3x3, stride 2 over 32x32 (out 16x16).
        let g = ConvGeometry { n: 128, c: 64, h: 32, w: 32, o: 128, kernel: (3, 3), stride: (2, 2), padding: (1, 1), dilation: (1, 1), groups: 1 };
        let ops: [&dyn CustomKernel; 3] = [&Conv2d(g), &Conv2dBackwardInput(g), &Conv2dBackwardWeight(g)];
        for op in ops {
            let i = custom_inputs(op, &[]);
            assert_eq!(i.flops, Some(2 * 128 * 128 * 16 * 16 * 64 * 9));
            assert_eq!(i.shapes, "stride (2, 2) padding (1, 1)");
        }
        let grouped = ConvGeometry { groups: 4, ..g };
        assert_eq!(custom_inputs(&Conv2d(grouped), &[]).flops, Some(2 * 128 * 128 * 16 * 16 * 16 * 9));
        assert_eq!(custom_inputs(&Relu, &[]).flops, None);
    }
}
