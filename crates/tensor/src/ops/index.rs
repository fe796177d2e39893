//! Indexing ops: gather, scatter-add, index-select, joining tensors (cat, stack), and
//! `embedding`, an index-select of weight rows.

use crate::autograd::GradFn;
use crate::backend::Strided;
use crate::error::{Error, Result};
use crate::ops::{check_index, check_same_device, check_same_dtype, Dim};
use crate::tensor::Tensor;

/// Checks that `index` fits `src` off `dim` (same rank, no larger), as `torch.gather` requires.
fn check_fits(op: &'static str, src: &Tensor, index: &Tensor, dim: usize) -> Result<()> {
    check_index(op, index)?;
    check_same_device(op, src, index)?;
    if index.rank() != src.rank() || index.shape().iter().zip(src.shape()).enumerate().any(|(d, (i, s))| d != dim && i > s) {
        return Err(Error::shape(op, src.shape(), index.shape(), format!("disagree: the index must have the same rank and be no larger off dim {dim}")));
    }
    Ok(())
}

impl Tensor {
    /// `out[i][j] = self[i][index[i][j]]` for `dim = 1`, and likewise for any dim (`torch.gather`).
    pub fn gather(&self, dim: impl Dim, index: &Tensor) -> Result<Tensor> {
        let d = dim.resolve("gather", self.rank())?;
        check_fits("gather", self, index, d)?;
        let (src, idx) = (self.contiguous()?, index.contiguous()?);
        let (ss, is) = (src.storage(), idx.storage());
        let storage = self.device().backend().gather(
            Strided { storage: &*ss, layout: src.layout(), dtype: self.dtype() },
            Strided { storage: &*is, layout: idx.layout(), dtype: idx.dtype() },
            d,
        )?;
        let (shape, index) = (idx.shape().to_vec(), idx.detach());
        Ok(Tensor::from_op(storage, &shape, self.dtype(), self.device(), &[self], || GradFn::Gather { dim: d, index }))
    }

    /// A copy of `self` with `src` added at `index` along `dim` (`torch.scatter_add`).
    pub fn scatter_add(&self, dim: impl Dim, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = dim.resolve("scatter_add", self.rank())?;
        check_fits("scatter_add", self, index, d)?;
        check_same_dtype("scatter_add", self, src)?;
        check_same_device("scatter_add", self, src)?;
        if index.shape() != src.shape() {
            return Err(Error::shape("scatter_add", index.shape(), src.shape(), "index and src must have the same shape"));
        }
        let (dst, idx, s) = (self.contiguous()?, index.contiguous()?, src.contiguous()?);
        let (ds, is, ss) = (dst.storage(), idx.storage(), s.storage());
        let storage = self.device().backend().scatter_add(
            Strided { storage: &*ds, layout: dst.layout(), dtype: self.dtype() },
            Strided { storage: &*is, layout: idx.layout(), dtype: idx.dtype() },
            Strided { storage: &*ss, layout: s.layout(), dtype: s.dtype() },
            d,
        )?;
        let index = idx.detach();
        Ok(Tensor::from_op(storage, self.shape(), self.dtype(), self.device(), &[self, src], || GradFn::ScatterAdd { dim: d, index }))
    }

    /// The entries of the 1-D i64 `index` along `dim` (`torch.index_select`; also embedding lookup).
    pub fn index_select(&self, dim: impl Dim, index: &Tensor) -> Result<Tensor> {
        let d = dim.resolve("index_select", self.rank())?;
        check_index("index_select", index)?;
        check_same_device("index_select", self, index)?;
        if index.rank() != 1 {
            return Err(Error::shape("index_select", self.shape(), index.shape(), "the index must be 1-D"));
        }
        let idx = index.contiguous()?;
        let is = idx.storage();
        let storage = self.with_strided(|s| self.device().backend().index_select(s, Strided { storage: &*is, layout: idx.layout(), dtype: idx.dtype() }, d))?;
        let mut shape = self.shape().to_vec();
        shape[d] = index.numel();
        let index = idx.detach();
        Ok(Tensor::from_op(storage, &shape, self.dtype(), self.device(), &[self], || GradFn::IndexSelect { dim: d, index }))
    }

    /// Joins tensors along `dim` (`torch.cat`).
    pub fn cat(parts: &[&Tensor], dim: impl Dim) -> Result<Tensor> {
        let first = *parts.first().ok_or_else(|| Error::bad_shape("cat", &[], "needs at least one tensor"))?;
        if let Some(p) = crate::autocast::promoted(parts)? {
            return Tensor::cat(&p.iter().collect::<Vec<_>>(), dim);
        }
        let d = dim.resolve("cat", first.rank())?;
        for p in &parts[1..] {
            check_same_dtype("cat", first, p)?;
            check_same_device("cat", first, p)?;
            let agree = p.rank() == first.rank() && p.shape().iter().zip(first.shape()).enumerate().all(|(i, (a, b))| i == d || a == b);
            if !agree {
                return Err(Error::shape("cat", first.shape(), p.shape(), format!("must agree on every dim but {d}")));
            }
        }
        let mut shape = first.shape().to_vec();
        shape[d] = parts.iter().try_fold(0usize, |n, p| n.checked_add(p.shape()[d])).unwrap_or(usize::MAX);
        crate::tensor::checked_numel("cat", &shape, first.dtype())?;
        let storages: Vec<_> = parts.iter().map(|p| p.storage()).collect();
        let views: Vec<Strided> = parts.iter().zip(&storages).map(|(p, s)| Strided { storage: &**s, layout: p.layout(), dtype: p.dtype() }).collect();
        let storage = first.device().backend().concat(&views, d)?;
        let sizes: Vec<usize> = parts.iter().map(|p| p.shape()[d]).collect();
        Ok(Tensor::from_op(storage, &shape, first.dtype(), first.device(), parts, || GradFn::Cat { dim: d, sizes }))
    }

    /// Stacks equal-shaped tensors along a new axis `dim` (`torch.stack`).
    pub fn stack(parts: &[&Tensor], dim: impl Dim) -> Result<Tensor> {
        let first = *parts.first().ok_or_else(|| Error::bad_shape("stack", &[], "needs at least one tensor"))?;
        let d = dim.resolve("stack", first.rank() + 1)?;
        let expanded: Vec<Tensor> = parts.iter().map(|p| p.unsqueeze(d)).collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = expanded.iter().collect();
        Tensor::cat(&refs, d)
    }

    /// Rows of `weight` picked by the i64 indices in `self` (`torch.nn.functional.embedding`);
    /// the gradient scatters back into the picked rows.
    ///
    /// # Shapes
    /// - `self`: i64 indices of any shape `[*]`, each in `0..V`
    /// - `weight`: `[V, D]`
    /// - result: `[*, D]`
    pub fn embedding(&self, weight: &Tensor) -> Result<Tensor> {
        check_index("embedding", self)?;
        check_same_device("embedding", self, weight)?;
        if weight.rank() != 2 {
            return Err(Error::shape("embedding", self.shape(), weight.shape(), "must be i64 indices of any shape and a 2-D [V, D] weight"));
        }
        let flat = self.reshape(&[self.numel()])?;
        let mut shape = self.shape().to_vec();
        shape.push(weight.shape()[1]);
        weight.index_select(0usize, &flat)?.reshape(&shape)
    }
}
