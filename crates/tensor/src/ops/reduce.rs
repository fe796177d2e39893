//! Reductions: sum, mean, max, min and their arg-variants over one or more axes.

use crate::autograd::GradFn;
use crate::backend::{ReduceOp, Strided};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ops::Dim;
use crate::tensor::Tensor;

fn resolve_dims(op: &'static str, dims: &[usize], rank: usize) -> Result<Vec<usize>> {
    let mut out: Vec<usize> = dims.iter().map(|&d| d.resolve(op, rank)).collect::<Result<_>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

impl Tensor {
    /// Runs `op` over `dims` (sorted, unique) and returns the result with `keepdim` shape.
    /// A run of adjacent axes is reduced in place as `[outer, len, inner]`; otherwise the
    /// reduced axes are first permuted to the end.
    fn reduce_raw(&self, op: ReduceOp, dims: &[usize]) -> Result<(crate::Storage, Vec<usize>, DType)> {
        let name = "reduce";
        let shape = self.shape();
        for &d in dims {
            if shape[d] == 0 && !matches!(op, ReduceOp::Sum) {
                return Err(Error::bad_shape(name, shape, format!("{op:?} over the empty dim {d}")));
            }
        }
        let mut keep = shape.to_vec();
        for &d in dims {
            keep[d] = 1;
        }
        let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
        if !adjacent && op == ReduceOp::Sum && self.dtype().is_float() {
            // Sum the last run of adjacent axes first, then the others: two reductions that
            // read the input once, where permuting first would copy all of it. A convolution's
            // bias gradient (a sum over N, H and W) is the common case.
            let last = dims.windows(2).rposition(|w| w[1] != w[0] + 1).map_or(0, |i| i + 1);
            let (storage, partial_shape, dtype) = self.reduce_raw(op, &dims[last..])?;
            let partial = Tensor::from_parts(storage, Layout::contiguous(&partial_shape), dtype, self.device(), None);
            let (storage, _, dtype) = partial.reduce_raw(op, &dims[..last])?;
            return Ok((storage, keep, dtype));
        }
        let x = if adjacent {
            self.contiguous()?
        } else {
            let mut perm: Vec<usize> = (0..self.rank()).filter(|d| !dims.contains(d)).collect();
            perm.extend_from_slice(dims);
            self.permute(&perm)?.contiguous()?
        };
        let (outer, len, inner) = if adjacent && !dims.is_empty() {
            let (a, b) = (dims[0], dims[dims.len() - 1]);
            (shape[..a].iter().product(), shape[a..=b].iter().product(), shape[b + 1..].iter().product())
        } else {
            let len: usize = dims.iter().map(|&d| shape[d]).product();
            (self.numel() / len.max(1), len, 1usize)
        };
        let out_dtype = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I64,
            ReduceOp::Sum if !self.dtype().is_float() => DType::I64,
            _ => self.dtype(),
        };
        if len == 0 {
            return Ok((self.device().backend().full(outer * inner, 0.0, out_dtype)?, keep, out_dtype));
        }
        let layout = Layout::new(vec![outer, len, inner], vec![len * inner, inner, 1], x.layout().offset());
        let storage = x.storage();
        let out = self.device().backend().reduce(op, Strided { storage: &*storage, layout: &layout, dtype: x.dtype() })?;
        Ok((out, keep, out_dtype))
    }

    fn finish_reduce(&self, out: Tensor, keep: &[usize], dims: &[usize], keepdim: bool) -> Result<Tensor> {
        if keepdim {
            return Ok(out);
        }
        let shape: Vec<usize> = keep.iter().enumerate().filter(|(i, _)| !dims.contains(i)).map(|(_, &s)| s).collect();
        out.reshape(&shape)
    }

    /// Sum over `dims`. Integer and bool tensors sum to i64.
    pub fn sum(&self, dims: &[usize], keepdim: bool) -> Result<Tensor> {
        if let Some([x]) = crate::autocast::widened([self])? {
            return x.sum(dims, keepdim);
        }
        let dims = resolve_dims("sum", dims, self.rank())?;
        let (storage, keep, dtype) = self.reduce_raw(ReduceOp::Sum, &dims)?;
        let from = self.shape().to_vec();
        let out = Tensor::from_op(storage, &keep, dtype, self.device(), &[self], || GradFn::Sum { from });
        self.finish_reduce(out, &keep, &dims, keepdim)
    }

    /// Sum of every element, as a 0-dimensional tensor.
    pub fn sum_all(&self) -> Result<Tensor> {
        let dims: Vec<usize> = (0..self.rank()).collect();
        self.sum(&dims, false)
    }

    /// Mean over `dims` (floats only).
    pub fn mean(&self, dims: &[usize], keepdim: bool) -> Result<Tensor> {
        crate::ops::check_float("mean", self)?;
        let dims = resolve_dims("mean", dims, self.rank())?;
        let n: usize = dims.iter().map(|&d| self.shape()[d]).product();
        self.sum(&dims, keepdim)?.div_scalar(n as f64)
    }

    pub fn mean_all(&self) -> Result<Tensor> {
        let dims: Vec<usize> = (0..self.rank()).collect();
        self.mean(&dims, false)
    }

    /// Variance over `dims`; `unbiased` divides by `n - 1` as `torch.var(correction=1)`.
    pub fn var(&self, dims: &[usize], keepdim: bool, unbiased: bool) -> Result<Tensor> {
        let dims = resolve_dims("var", dims, self.rank())?;
        let n: usize = dims.iter().map(|&d| self.shape()[d]).product();
        let centered = self.sub(&self.mean(&dims, true)?)?;
        let denom = if unbiased { n.saturating_sub(1).max(1) } else { n.max(1) };
        centered.square()?.sum(&dims, keepdim)?.div_scalar(denom as f64)
    }

    fn extremum(&self, op: ReduceOp, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        let d = dim.resolve("max", self.rank())?;
        let (storage, keep, dtype) = self.reduce_raw(op, &[d])?;
        let out = Tensor::from_op(storage, &keep, dtype, self.device(), &[self], || GradFn::Extremum { dim: d, max: op == ReduceOp::Max });
        self.finish_reduce(out, &keep, &[d], keepdim)
    }

    /// Maximum along `dim`; the gradient goes to the first maximal element.
    pub fn max(&self, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        self.extremum(ReduceOp::Max, dim, keepdim)
    }

    /// Minimum along `dim`; the gradient goes to the first minimal element.
    pub fn min(&self, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        self.extremum(ReduceOp::Min, dim, keepdim)
    }

    /// Maximum of every element.
    pub fn max_all(&self) -> Result<Tensor> {
        self.flatten(0usize, -1isize)?.max(0usize, false)
    }

    /// Minimum of every element.
    pub fn min_all(&self) -> Result<Tensor> {
        self.flatten(0usize, -1isize)?.min(0usize, false)
    }

    fn arg(&self, op: ReduceOp, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        let d = dim.resolve("argmax", self.rank())?;
        let (storage, keep, dtype) = self.reduce_raw(op, &[d])?;
        let max = op == ReduceOp::ArgMax;
        let out = Tensor::untracked_op(storage, &keep, dtype, self.device(), &[self], || GradFn::ArgExtremum { dim: d, max });
        self.finish_reduce(out, &keep, &[d], keepdim)
    }

    /// Index (i64) of the first maximum along `dim`.
    pub fn argmax(&self, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        self.arg(ReduceOp::ArgMax, dim, keepdim)
    }

    /// Index (i64) of the first minimum along `dim`.
    pub fn argmin(&self, dim: impl Dim, keepdim: bool) -> Result<Tensor> {
        self.arg(ReduceOp::ArgMin, dim, keepdim)
    }
}

/// The sum of an f16 or bf16 `x [.., C]` over every axis but the last, written in f32 `[C]`
/// (`torch.sum(x, dims, dtype=torch.float32)`): a linear layer's bias gradient under autocast,
/// which would be cast to its f32 bias at once. Composite: `x` widened, then summed.
#[derive(Clone, Copy, Debug)]
pub struct SumRowsWide;

impl crate::CustomKernel for SumRowsWide {
    fn name(&self) -> &'static str {
        "sum_rows_wide"
    }
}

impl crate::CustomOp for SumRowsWide {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(vec![inputs[0].shape().last().copied().unwrap_or(1)], DType::F32)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0].to_dtype(DType::F32)?;
        let lead: Vec<usize> = (0..x.rank().saturating_sub(1)).collect();
        Ok(vec![x.sum(&lead, false)?])
    }
}

/// The sum of `x [N, C, ..]` over every axis but the channels (the second), in `[C]`: a
/// convolution's bias gradient (`torch.sum(dy, (0, 2, 3))`). In f32 where `wide` (autocast's
/// f16 or bf16 copy of an f32 bias, whose gradient would be cast to f32 at once), else in x's
/// type. Composite: `x` (widened where `wide`) summed over those axes.
#[derive(Clone, Copy, Debug)]
pub struct SumChannels {
    pub wide: bool,
}

impl crate::CustomKernel for SumChannels {
    fn name(&self) -> &'static str {
        "sum_channels"
    }
}

impl crate::CustomOp for SumChannels {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let x = inputs[0];
        let dtype = if self.wide { DType::F32 } else { x.dtype() };
        vec![(vec![x.shape().get(1).copied().unwrap_or(1)], dtype)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = match self.wide {
            true => inputs[0].to_dtype(DType::F32)?,
            false => inputs[0].clone(),
        };
        let rest: Vec<usize> = (0..x.rank()).filter(|&d| d != 1).collect();
        Ok(vec![x.sum(&rest, false)?])
    }
}

impl Tensor {
    /// This `[.., C]` summed into f32 `[C]` ([`SumRowsWide`]) where it is f16 or bf16 of rank 2
    /// or more and the device has the kernel, else `None` (the caller sums in its type).
    pub(crate) fn sum_rows_wide(&self) -> Option<Result<Tensor>> {
        if !matches!(self.dtype(), DType::F16 | DType::BF16) || self.rank() < 2 {
            return None;
        }
        Some(crate::fused::run(&SumRowsWide, &[self])?.map(|mut outs| outs.remove(0)))
    }

    /// This `[N, C, ..]` (rank 3 or more) summed over all but its channels ([`SumChannels`]):
    /// one kernel where the device has it, the composite otherwise.
    pub(crate) fn sum_channels(&self, wide: bool) -> Result<Tensor> {
        if self.rank() < 3 {
            return Err(Error::bad_shape("sum_channels", self.shape(), "needs [N, C, ..] of rank 3 or more"));
        }
        let x = self.contiguous()?;
        Ok(crate::fused::run_or_composite(&SumChannels { wide }, &[&x])?.remove(0))
    }
}
