//! Making tensors: from host values, constants and seeded random fills; and moving values,
//! to another device ([`Tensor::to_device`], recorded) or into an existing tensor
//! ([`Tensor::assign`], outside the graph).

use crate::autograd::GradFn;
use crate::backend::Distribution;
use crate::device::Device;
use crate::dtype::{f64_to_bytes, DType, Element};
use crate::error::{Error, Result};
use crate::layout::{Layout, MAX_ELEMENTS};
use crate::ops::check_same_device;
use crate::tensor::{checked_numel, Tensor};

impl Tensor {
    /// A tensor from host values, copied to `device`. Errors if `data.len()` is not the
    /// product of `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], device: &Device) -> Result<Tensor> {
        let want = checked_numel("from_slice", shape, T::DTYPE)?;
        if data.len() != want {
            return Err(Error::ElementCount { op: "from_slice", got: data.len(), want, shape: shape.to_vec() });
        }
        let storage = device.backend().from_host(bytemuck::cast_slice(data), T::DTYPE)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), T::DTYPE, device, None))
    }

    /// Like [`Tensor::from_slice`], taking ownership.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize], device: &Device) -> Result<Tensor> {
        Tensor::from_slice(&data, shape, device)
    }

    /// A tensor from `f64` values converted to `dtype` (handy in tests and for constants).
    pub fn from_f64s(data: &[f64], shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        let want = checked_numel("from_f64s", shape, dtype)?;
        if data.len() != want {
            return Err(Error::ElementCount { op: "from_f64s", got: data.len(), want, shape: shape.to_vec() });
        }
        let storage = device.backend().from_host(&f64_to_bytes(data, dtype), dtype)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None))
    }

    /// Every element equal to `value`.
    pub fn full(shape: &[usize], value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        let storage = device.backend().full(checked_numel("full", shape, dtype)?, value, dtype)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None))
    }

    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 0.0, dtype, device)
    }

    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, dtype, device)
    }

    /// A 0-dimensional tensor.
    pub fn scalar(value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(&[], value, dtype, device)
    }

    /// Zeros with this tensor's shape, dtype and device.
    pub fn zeros_like(&self) -> Result<Tensor> {
        Tensor::zeros(self.shape(), self.dtype(), self.device())
    }

    pub fn ones_like(&self) -> Result<Tensor> {
        Tensor::ones(self.shape(), self.dtype(), self.device())
    }

    /// `start, start + step, ...` up to but excluding `end`, as `torch.arange`.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            return Err(Error::bad_shape("arange", &[], format!("start {start}, end {end} and step {step} must be finite, step non-zero")));
        }
        let n = ((end - start) / step).ceil().max(0.0);
        // Checked in f64 first: `as usize` saturates, and a saturated count must not reach a Vec.
        if n > MAX_ELEMENTS as f64 {
            return Err(Error::bad_shape("arange", &[], format!("start {start}, end {end} and step {step} give {n} elements, too many to hold")));
        }
        let n = n as usize;
        checked_numel("arange", &[n], dtype)?;
        let values: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
        Tensor::from_f64s(&values, &[n], dtype, device)
    }

    /// Seeded random values; the same seed gives the same tensor on every backend.
    pub fn random(shape: &[usize], dist: Distribution, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        let numel = checked_numel("random", shape, dtype)?;
        if numel > u32::MAX as usize {
            return Err(Error::bad_shape("random", shape, "more than 2^32 elements in one random tensor"));
        }
        if let Distribution::Uniform { low, high } = dist {
            if dtype.is_float() && (low, high) != (0.0, 1.0) {
                // Scale and shift as kernels of their own: inside one kernel a GPU compiler may
                // fuse `low + (high - low) * u` into an fma, whose one rounding differs from the
                // CPU's two (seen on NVIDIA), and a seed must give the same bits everywhere.
                let work = if dtype == DType::F64 { DType::F64 } else { DType::F32 };
                let u = Tensor::random(shape, Distribution::Uniform { low: 0.0, high: 1.0 }, seed, work, device)?;
                let x = u.mul_scalar(high - low)?.add_scalar(low)?;
                return if work == dtype { Ok(x) } else { x.to_dtype(dtype) };
            }
        }
        let storage = device.backend().random(dist, numel, seed, dtype)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None))
    }

    /// Uniform on `[low, high)`.
    pub fn rand(shape: &[usize], low: f64, high: f64, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::random(shape, Distribution::Uniform { low, high }, seed, dtype, device)
    }

    /// Standard normal.
    pub fn randn(shape: &[usize], seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::random(shape, Distribution::Normal { mean: 0.0, std: 1.0 }, seed, dtype, device)
    }

    /// 1 with probability `p`, else 0.
    pub fn bernoulli(shape: &[usize], p: f64, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::random(shape, Distribution::Bernoulli { p }, seed, dtype, device)
    }

    /// This tensor on `device` (the same tensor if already there). Gradients flow back.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device() == device {
            return Ok(self.clone());
        }
        let bytes = self.with_strided(|s| self.device().backend().to_host(s))?;
        let storage = device.backend().from_host(&bytes, self.dtype())?;
        let src_device = self.device().clone();
        Ok(Tensor::from_op(storage, self.shape(), self.dtype(), device, &[self], || GradFn::ToDevice { from: src_device }))
    }

    /// Replaces this tensor's contents with `value`'s (same shape, dtype and device), without
    /// touching the graph: how optimizers update parameters and batch norm its running stats.
    /// Views taken earlier keep the old contents.
    pub fn assign(&self, value: &Tensor) -> Result<()> {
        if value.shape() != self.shape() {
            return Err(Error::shape("assign", self.shape(), value.shape(), "must have the same shape"));
        }
        if value.dtype() != self.dtype() {
            return Err(Error::DTypeMismatch { op: "assign", lhs: self.dtype(), rhs: value.dtype() });
        }
        check_same_device("assign", self, value)?;
        if !self.is_contiguous() || self.0.layout.offset() != 0 {
            return Err(Error::bad_shape("assign", self.shape(), "only a tensor that owns contiguous storage can be assigned to"));
        }
        let value = value.contiguous()?;
        let new = if value.0.layout.offset() == 0 { value.storage() } else { value.with_strided(|s| self.device().backend().copy(s))? };
        self.replace_storage(new);
        Ok(())
    }
}
