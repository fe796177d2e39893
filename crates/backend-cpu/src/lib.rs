//! `liandan-backend-cpu`: the reference backend, the kernel trait on `ndarray` buffers with
//! rayon threads, products on the `gemm` crate (few-row products against a transposed rhs
//! written column-major; `LIANDAN_CPU_GEMM=tuned` times those ways and `matrixmultiply` per
//! shape on this CPU instead, `matrixmultiply` puts every product there), convolution one
//! image at a time without a batch-sized column buffer, padded 3x3 layers of 64 channels and
//! more as Winograd F(2x2, 3x3) (`winograd.rs`).
//!
//! Linking this crate registers the CPU device; name it once (`use liandan_backend_cpu as _;`)
//! so the linker keeps it. Kernels live in one module per family; this file only dispatches.
//! A custom op's kernel written in another crate reads its inputs and makes its outputs
//! through [`kernel`].
//! A CPU tensor converts to and from `ndarray` arrays without copying where its layout allows:
//! [`to_array_view`], [`into_array`], [`from_array`] (the `array` module's table says when each
//! copies). `ndarray` is re-exported, so a program uses the same version as this crate.
//! A training loop of one's own runs its steps faster inside [`on_pool`], as `Trainer::fit`
//! does on the CPU.
//!
//! ```
//! use liandan_backend_cpu::{ndarray, to_array};
//! use liandan_tensor::{DType, Device, Tensor};
//! let x = Tensor::arange(0.0, 6.0, 1.0, DType::F32, &Device::cpu())?.reshape(&[2, 3])?;
//! let a: ndarray::ArrayD<f32> = to_array(&x.t()?)?;
//! assert_eq!(a.shape(), &[3, 2]);
//! assert_eq!(a[[2, 1]], 5.0);
//! # Ok::<(), liandan_tensor::Error>(())
//! ```

mod array;
mod conv;
mod elementwise;
mod fused;
mod fused_layer_norm;
mod fused_lstm;
mod fused_norm;
mod fused_rows;
mod index;
pub mod kernel;
mod matmul;
mod pool;
mod reduce;
mod scalar;
pub mod settings;
mod storage;
mod strided;
mod threads;
mod vmath;
mod window;
mod winograd;

use liandan_tensor::backend::{BinaryOp, CmpOp, Distribution, ReduceOp, UnaryOp, Window2d};
use liandan_tensor::{Backend, CustomKernel, DType, Device, DeviceKind, Result, Storage, Strided};
use rayon::prelude::*;

pub use array::{from_array, from_array_view, into_array, to_array, to_array_view, TensorView};
pub use ndarray;
use storage::{cpu, each_dtype, Scalar};
pub use storage::{CpuElement, CpuStorage};
use strided::{contiguous, materialize, parallel, CHUNK};
pub use threads::{on_pool, on_pool_for};

/// The CPU backend. Stateless: every call allocates its result and returns when it is done.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }
}

liandan_tensor::inventory::submit! {
    liandan_tensor::BackendProvider { name: "cpu", devices: || vec![std::sync::Arc::new(CpuBackend::new()) as _] }
}

/// The CPU device (the registered one, so `Device::same` holds between calls).
pub fn device() -> Device {
    Device::cpu()
}

fn ok(s: CpuStorage) -> Result<Storage> {
    Ok(s.into_storage())
}

/// `numel` elements, element `i` from `f(i)`, in parallel when large.
fn generate<T: Scalar>(numel: usize, f: impl Fn(usize) -> T + Sync) -> Result<Vec<T>> {
    let mut out = storage::alloc("full", numel, T::default())?;
    if parallel(numel) {
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, o)| o.iter_mut().enumerate().for_each(|(j, x)| *x = f(c * CHUNK + j)));
    } else {
        out.iter_mut().enumerate().for_each(|(i, x)| *x = f(i));
    }
    Ok(out)
}

/// A buffer of `dtype` from f64 values `f(i)`; for `Bool`, nonzero is true.
fn from_f64_fn(numel: usize, dtype: DType, f: impl Fn(usize) -> f64 + Sync) -> Result<CpuStorage> {
    Ok(match dtype {
        DType::F32 => CpuStorage::F32(generate(numel, |i| Scalar::from_f64(f(i)))?.into()),
        DType::F16 => CpuStorage::F16(generate(numel, |i| Scalar::from_f64(f(i)))?.into()),
        DType::BF16 => CpuStorage::BF16(generate(numel, |i| Scalar::from_f64(f(i)))?.into()),
        DType::F64 => CpuStorage::F64(generate(numel, &f)?.into()),
        DType::I64 => CpuStorage::I64(generate(numel, |i| Scalar::from_f64(f(i)))?.into()),
        DType::U8 => CpuStorage::U8(generate(numel, |i| Scalar::from_f64(f(i)))?.into()),
        DType::Bool => CpuStorage::Bool(generate(numel, |i| (f(i) != 0.0) as u8)?.into()),
    })
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn memory_stats(&self) -> Option<liandan_tensor::MemoryStats> {
        Some(storage::memory_stats())
    }

    fn set_memory_budget(&self, bytes: Option<u64>) -> bool {
        storage::set_budget(bytes);
        true
    }

    fn reset_peak_memory(&self) {
        storage::reset_peak();
    }

    /// Frees the large buffers the CPU keeps for reuse (see the `pool` module).
    fn empty_cache(&self) {
        pool::empty();
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("name".into(), "cpu".into()),
            ("type".into(), "Cpu".into()),
            ("threads".into(), rayon::current_num_threads().to_string()),
            (
                "gemm".into(),
                match matmul::engine() {
                    Ok(matmul::Engine::Gemm) => "gemm crate (f32/f64; f16/bf16 through f32)".into(),
                    Ok(matmul::Engine::Tuned) => "gemm or matrixmultiply timed per shape, LIANDAN_CPU_GEMM (f32/f64; f16/bf16 through f32)".into(),
                    Ok(matmul::Engine::MatrixMultiply) => "matrixmultiply, LIANDAN_CPU_GEMM (f32/f64; f16/bf16 through f32)".into(),
                    Err(e) => e.to_string(),
                },
            ),
        ]
    }

    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
        ok(CpuStorage::from_bytes(bytes, dtype)?)
    }

    fn to_host(&self, src: Strided) -> Result<Vec<u8>> {
        let s = cpu(src.storage);
        Ok(each_dtype!(s, v => match contiguous(v, src.layout) {
            Some(xs) => bytemuck::cast_slice(xs).to_vec(),
            None => bytemuck::cast_slice(&materialize(v, src.layout)?).to_vec(),
        }))
    }

    fn full(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        // One write of the value, not a fill and then a write of each element.
        fn fill<T: Scalar>(numel: usize, value: T) -> Result<ndarray::Array1<T>> {
            Ok(storage::alloc("full", numel, value)?.into())
        }
        ok(match dtype {
            DType::F32 => CpuStorage::F32(fill(numel, Scalar::from_f64(value))?),
            DType::F16 => CpuStorage::F16(fill(numel, Scalar::from_f64(value))?),
            DType::BF16 => CpuStorage::BF16(fill(numel, Scalar::from_f64(value))?),
            DType::F64 => CpuStorage::F64(fill(numel, value)?),
            DType::I64 => CpuStorage::I64(fill(numel, Scalar::from_f64(value))?),
            DType::U8 => CpuStorage::U8(fill(numel, Scalar::from_f64(value))?),
            DType::Bool => CpuStorage::Bool(fill(numel, (value != 0.0) as u8)?),
        })
    }

    fn random(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        // The counter is 32 bits on every backend (WGSL has no u64), so it wraps past 2^32.
        ok(from_f64_fn(numel, dtype, |i| liandan_tensor::rng::sample(dist, seed, i as u32) as f64)?)
    }

    fn copy(&self, src: Strided) -> Result<Storage> {
        ok(storage::map_dtype!(cpu(src.storage), v => materialize(v, src.layout)?))
    }

    fn cast(&self, src: Strided, to: DType) -> Result<Storage> {
        ok(elementwise::cast(cpu(src.storage), src.layout, to)?)
    }

    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        ok(elementwise::unary(op, cpu(x.storage), x.layout)?)
    }

    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        ok(elementwise::binary(op, cpu(lhs.storage), lhs.layout, cpu(rhs.storage), rhs.layout)?)
    }

    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        ok(elementwise::compare(op, cpu(lhs.storage), lhs.layout, cpu(rhs.storage), rhs.layout)?)
    }

    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        let (c, t, f) = (cpu(cond.storage), cpu(on_true.storage), cpu(on_false.storage));
        ok(elementwise::select(c, cond.layout, t, on_true.layout, f, on_false.layout)?)
    }

    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        ok(reduce::reduce(op, cpu(x.storage), x.layout)?)
    }

    fn matmul(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        ok(matmul::matmul(cpu(lhs.storage), lhs.layout, cpu(rhs.storage), rhs.layout)?)
    }

    fn im2col(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage> {
        ok(window::im2col(cpu(x.storage), x.layout, window, pad_value)?)
    }

    fn col2im(&self, cols: Strided, window: Window2d) -> Result<Storage> {
        ok(window::col2im(cpu(cols.storage), cols.layout, window)?)
    }

    fn max_pool2d(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)> {
        let (values, indices) = window::max_pool2d(cpu(x.storage), x.layout, window)?;
        Ok((values.into_storage(), indices.into_storage()))
    }

    fn avg_pool2d(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        ok(window::avg_pool2d(cpu(x.storage), x.layout, window, count_include_pad)?)
    }

    fn avg_pool2d_backward(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        ok(window::avg_pool2d_backward(cpu(dy.storage), dy.layout, window, count_include_pad)?)
    }

    fn gather(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        ok(index::gather(cpu(src.storage), src.layout, cpu(index.storage), index.layout, dim)?)
    }

    fn scatter_add(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage> {
        let (d, i, s) = (cpu(dst.storage), cpu(index.storage), cpu(src.storage));
        ok(index::scatter_add(d, dst.layout, i, index.layout, s, src.layout, dim)?)
    }

    fn index_select(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        ok(index::index_select(cpu(src.storage), src.layout, cpu(index.storage), index.layout, dim)?)
    }

    fn concat(&self, parts: &[Strided], dim: usize) -> Result<Storage> {
        let parts: Vec<(&CpuStorage, &liandan_tensor::Layout)> = parts.iter().map(|p| (cpu(p.storage), p.layout)).collect();
        ok(index::concat(&parts, dim)?)
    }

    /// The tensor crate's own custom ops it has kernels for (`fused.rs`, `conv.rs`), then the
    /// kernel the op's crate wrote for this backend (`kernel.rs` is what such a kernel uses).
    fn custom(&self, op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        fused::fused(op, inputs).or_else(|| op.kernel(self, inputs))
    }
}

#[cfg(test)]
mod tests;
