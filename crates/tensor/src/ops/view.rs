//! Views: new layouts over the same storage (reshape, permute, narrow, expand, squeeze), and
//! `contiguous`, which copies only when the layout requires it.

use crate::autograd::GradFn;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ops::Dim;
use crate::tensor::Tensor;

impl Tensor {
    fn view(&self, layout: Layout, grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        Tensor::view_op(self.storage(), layout, self.dtype(), self.device(), &[self], grad_fn)
    }

    /// The same elements in a new shape; a view when the strides allow, else a copy.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let n = crate::layout::check_shape("reshape", shape)?;
        if n != self.numel() {
            return Err(Error::shape("reshape", self.shape(), shape, format!("hold {} and {n} elements", self.numel())));
        }
        match self.layout().reshape(shape) {
            Some(l) => Ok(self.view(l, || GradFn::Reshape { from: self.shape().to_vec() })),
            None => self.contiguous()?.reshape(shape),
        }
    }

    /// Merges dims `start..=end` into one, as `torch.flatten`.
    pub fn flatten(&self, start: impl Dim, end: impl Dim) -> Result<Tensor> {
        if self.rank() == 0 {
            return self.reshape(&[1]);
        }
        let (s, e) = (start.resolve("flatten", self.rank())?, end.resolve("flatten", self.rank())?);
        if s > e {
            return Err(Error::bad_shape("flatten", self.shape(), format!("start dim {s} is after end dim {e}")));
        }
        let mut shape = self.shape()[..s].to_vec();
        shape.push(self.shape()[s..=e].iter().product());
        shape.extend_from_slice(&self.shape()[e + 1..]);
        self.reshape(&shape)
    }

    /// Reorders the axes: axis `i` of the result is axis `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let layout = self.layout().permute(perm)?;
        Ok(self.view(layout, || GradFn::Permute { perm: perm.to_vec() }))
    }

    /// Swaps two axes.
    pub fn transpose(&self, d0: impl Dim, d1: impl Dim) -> Result<Tensor> {
        let (a, b) = (d0.resolve("transpose", self.rank())?, d1.resolve("transpose", self.rank())?);
        let mut perm: crate::layout::Dims = (0..self.rank()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// The transpose of a matrix (swaps the last two axes of a batch).
    pub fn t(&self) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::bad_shape("t", self.shape(), "needs at least 2 dims"));
        }
        self.transpose(-2isize, -1isize)
    }

    /// Elements `start..start + len` of axis `dim`.
    pub fn narrow(&self, dim: impl Dim, start: usize, len: usize) -> Result<Tensor> {
        let d = dim.resolve("narrow", self.rank())?;
        let layout = self.layout().narrow(d, start, len)?;
        let full = self.shape()[d];
        Ok(self.view(layout, || GradFn::Narrow { dim: d, start, full }))
    }

    /// The slice at `index` of axis `dim`, which is removed.
    pub fn select(&self, dim: impl Dim, index: usize) -> Result<Tensor> {
        let d = dim.resolve("select", self.rank())?;
        self.narrow(d, index, 1)?.squeeze(d)
    }

    /// Splits axis `dim` into pieces of `size` (the last may be smaller).
    pub fn split(&self, size: usize, dim: impl Dim) -> Result<Vec<Tensor>> {
        let d = dim.resolve("split", self.rank())?;
        if size == 0 {
            return Err(Error::bad_shape("split", self.shape(), "split size must be positive"));
        }
        let n = self.shape()[d];
        (0..n).step_by(size).map(|s| self.narrow(d, s, size.min(n - s))).collect()
    }

    /// `n` nearly equal pieces along `dim`, as `torch.chunk`.
    pub fn chunk(&self, n: usize, dim: impl Dim) -> Result<Vec<Tensor>> {
        let d = dim.resolve("chunk", self.rank())?;
        if n == 0 {
            return Err(Error::bad_shape("chunk", self.shape(), "number of chunks must be positive"));
        }
        self.split(self.shape()[d].div_ceil(n).max(1), d)
    }

    /// Broadcasts to `shape` without copying (size-1 axes repeat with stride 0).
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let layout = self.layout().broadcast_to(shape)?;
        let from = self.shape().to_vec();
        Ok(self.view(layout, || GradFn::Expand { from }))
    }

    /// Removes axis `dim`, which must have size 1.
    pub fn squeeze(&self, dim: impl Dim) -> Result<Tensor> {
        let d = dim.resolve("squeeze", self.rank())?;
        if self.shape()[d] != 1 {
            return Err(Error::bad_shape("squeeze", self.shape(), format!("dim {d} has size {}, not 1", self.shape()[d])));
        }
        let mut shape = self.shape().to_vec();
        shape.remove(d);
        self.reshape(&shape)
    }

    /// Inserts a size-1 axis at `dim` (`0..=rank`; negative counts from the end of the result).
    pub fn unsqueeze(&self, dim: impl Dim) -> Result<Tensor> {
        let d = dim.resolve("unsqueeze", self.rank() + 1)?;
        let mut shape = self.shape().to_vec();
        shape.insert(d, 1);
        self.reshape(&shape)
    }

    /// A row-major copy, or `self` if already contiguous.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let storage = self.with_strided(|s| self.device().backend().copy(s))?;
        Ok(Tensor::from_op(storage, self.shape(), self.dtype(), self.device(), &[self], || GradFn::Identity))
    }

    /// Sums this gradient-shaped tensor down to `shape` (undoing a broadcast).
    pub(crate) fn sum_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let lead = self.rank() - shape.len();
        let mut dims: Vec<usize> = (0..lead).collect();
        for (i, &s) in shape.iter().enumerate() {
            if s == 1 && self.shape()[lead + i] != 1 {
                dims.push(lead + i);
            }
        }
        let summed = if dims.is_empty() { self.clone() } else { self.sum(&dims, true)? };
        summed.reshape(shape)
    }
}
