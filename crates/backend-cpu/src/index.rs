//! Index kernels: gather, scatter_add, index_select and concat. Index values come from user
//! data, so every one is range-checked and a bad one is an error, never a panic.

use std::mem::MaybeUninit;

use liandan_tensor::{DType, Error, Layout, Result};

use rayon::prelude::*;

use crate::storage::{alloc, backend_error, bad_dtype, dtype_mismatch, each_dtype, map_dtype, reserve, CpuStorage, Scalar};
use crate::strided::{contiguous, materialize, parallel, Fault, Plan, CHUNK};

fn i64_data<'a>(op: &'static str, index: &'a CpuStorage) -> Result<&'a [i64]> {
    match index {
        CpuStorage::I64(v) => Ok(crate::storage::slice(v)),
        other => Err(bad_dtype(op, other.dtype(), "indices must be i64")),
    }
}

fn bad_shape(op: &'static str, shape: &[usize], detail: impl Into<String>) -> Error {
    Error::BadShape { op, shape: shape.to_vec(), detail: detail.into() }
}

/// Checks that `index` has the rank of `of` and fits inside it on every axis but `dim`.
fn check_fits(op: &'static str, index: &[usize], of: &[usize], dim: usize) -> Result<()> {
    if index.len() != of.len() || dim >= of.len() || index.iter().zip(of).enumerate().any(|(d, (i, o))| d != dim && i > o) {
        return Err(bad_shape(op, index, format!("index does not fit {of:?} off dim {dim}")));
    }
    Ok(())
}

pub(crate) fn gather(src: &CpuStorage, ls: &Layout, index: &CpuStorage, li: &Layout, dim: usize) -> Result<CpuStorage> {
    let idx = i64_data("gather", index)?;
    check_fits("gather", li.shape(), ls.shape(), dim)?;
    // `src` walked with the index's shape and a zero stride on `dim`: each element's offset is
    // the base its index value adds to.
    let mut strides = ls.strides().to_vec();
    let step = std::mem::replace(&mut strides[dim], 0);
    let base = Layout::new(li.shape(), strides, ls.offset());
    let size = ls.shape()[dim];
    Ok(map_dtype!(src, v => take("gather", v, &base, step, size, idx, li)?))
}

pub(crate) fn index_select(src: &CpuStorage, ls: &Layout, index: &CpuStorage, li: &Layout, dim: usize) -> Result<CpuStorage> {
    let idx = i64_data("index_select", index)?;
    if li.rank() != 1 || dim >= ls.rank() {
        return Err(bad_shape("index_select", li.shape(), format!("index must be 1-D and dim {dim} inside rank {}", ls.rank())));
    }
    // The same walk as gather, with the 1-D index broadcast to the result's shape.
    let mut shape = ls.shape().to_vec();
    shape[dim] = li.numel();
    let mut strides = ls.strides().to_vec();
    let step = std::mem::replace(&mut strides[dim], 0);
    let base = Layout::new(shape.clone(), strides, ls.offset());
    let mut idx_strides = vec![0; shape.len()];
    idx_strides[dim] = li.strides()[0];
    let idx_layout = Layout::new(shape, idx_strides, li.offset());
    let size = ls.shape()[dim];
    Ok(map_dtype!(src, v => take("index_select", v, &base, step, size, idx, &idx_layout)?))
}

/// `out[e] = v[base(e) + idx[e] * step]` over the index's shape.
fn take<T: Scalar>(op: &'static str, v: &[T], base: &Layout, step: usize, size: usize, idx: &[i64], li: &Layout) -> Result<Vec<T>> {
    let fault = Fault::default();
    let plan = Plan::new(li.shape(), [base, li]);
    let [sb, si] = plan.strides;
    let mut out = alloc("gather", plan.numel, T::default())?;
    plan.fill(&mut out, |o, [b, i]| {
        for (n, o) in o.iter_mut().enumerate() {
            match usize::try_from(idx[i + n * si]) {
                Ok(k) if k < size => *o = v[b + n * sb + k * step],
                _ => fault.set(idx[i + n * si], size),
            }
        }
    });
    fault.check(op)?;
    Ok(out)
}

pub(crate) fn scatter_add(dst: &CpuStorage, ld: &Layout, index: &CpuStorage, li: &Layout, src: &CpuStorage, ls: &Layout, dim: usize) -> Result<CpuStorage> {
    let idx = i64_data("scatter_add", index)?;
    if li.shape() != ls.shape() {
        return Err(Error::ShapeMismatch {
            op: "scatter_add",
            lhs: li.shape().to_vec(),
            rhs: ls.shape().to_vec(),
            detail: "index and src must share a shape".into(),
        });
    }
    check_fits("scatter_add", li.shape(), ld.shape(), dim)?;
    if dst.dtype() != src.dtype() {
        return Err(dtype_mismatch("scatter_add", dst, src));
    }
    if dst.dtype() == DType::Bool {
        return Err(bad_dtype("scatter_add", DType::Bool, "bools cannot be added; cast first"));
    }
    Ok(map_dtype!(dst, d => {
        // Same variant as `dst`, checked above, so this cast is the identity.
        let s = each_dtype!(src, s => bytemuck::cast_slice(s));
        scatter_add_t(d, ld, idx, li, s, ls, dim)?
    }))
}

/// Sequential: repeated indices make any two updates race, and this op feeds gather's and
/// embedding's backward, where the target axis is usually the only long one.
fn scatter_add_t<T: Scalar + bytemuck::Pod>(d: &[T], ld: &Layout, idx: &[i64], li: &Layout, s: &[T], ls: &Layout, dim: usize) -> Result<Vec<T>> {
    let mut out = materialize(d, ld)?;
    let mut strides = liandan_tensor::layout::contiguous_strides(ld.shape());
    let step = std::mem::replace(&mut strides[dim], 0);
    let size = ld.shape()[dim];
    let base = Layout::new(li.shape(), strides, 0);
    let plan = Plan::new(li.shape(), [li, ls, &base]);
    let [si, ss, sb] = plan.strides;
    let mut bad = None;
    plan.runs(0, plan.numel, |_, [i, j, b], n| {
        for e in 0..n {
            let k = idx[i + e * si];
            match usize::try_from(k) {
                Ok(k) if k < size => {
                    let at = b + e * sb + k * step;
                    out[at] = out[at].add(s[j + e * ss]);
                }
                _ => {
                    bad.get_or_insert(k);
                }
            }
        }
    });
    match bad {
        Some(index) => Err(Error::IndexOutOfRange { op: "scatter_add", index, size }),
        None => Ok(out),
    }
}

pub(crate) fn concat(parts: &[(&CpuStorage, &Layout)], dim: usize) -> Result<CpuStorage> {
    let Some(&(first, l0)) = parts.first() else {
        return Err(bad_shape("concat", &[], "nothing to join"));
    };
    let mut shape = l0.shape().to_vec();
    if dim >= shape.len() {
        return Err(Error::DimOutOfRange { op: "concat", dim: dim as isize, rank: shape.len() });
    }
    shape[dim] = 0;
    for &(s, l) in parts {
        if s.dtype() != first.dtype() {
            return Err(dtype_mismatch("concat", first, s));
        }
        let agrees = l.rank() == shape.len() && (0..shape.len()).all(|d| d == dim || l.shape()[d] == shape[d]);
        if !agrees {
            return Err(Error::ShapeMismatch { op: "concat", lhs: l0.shape().to_vec(), rhs: l.shape().to_vec(), detail: format!("differ off dim {dim}") });
        }
        shape[dim] += l.shape()[dim];
    }
    Ok(map_dtype!(first, _v => concat_t(parts, dim, &shape)?))
}

/// One part of a join: its elements, or one value broadcast over the part (a gap of zeros in
/// a gradient joined from pieces), written as a fill rather than copied out first.
enum Part<'a, T: Clone> {
    Elements(std::borrow::Cow<'a, [T]>),
    Fill(T),
}

impl<T: Copy> Part<'_, T> {
    /// Writes the part's row `o` of `width` elements to `dst`.
    fn write_row(&self, o: usize, width: usize, dst: &mut [MaybeUninit<T>]) {
        match self {
            Part::Elements(xs) => dst.iter_mut().zip(&xs[o * width..][..width]).for_each(|(d, &s)| {
                d.write(s);
            }),
            Part::Fill(v) => dst.iter_mut().for_each(|d| {
                d.write(*v);
            }),
        }
    }
}

fn concat_t<T: Scalar + bytemuck::Pod>(parts: &[(&CpuStorage, &Layout)], dim: usize, shape: &[usize]) -> Result<Vec<T>> {
    let outer: usize = shape[..dim].iter().product();
    let inner: usize = shape[dim + 1..].iter().product();
    let total = shape[dim] * inner;
    // Each part as a row-major slice or a fill, with its row width.
    let mut pieces: Vec<(Part<T>, usize)> = Vec::with_capacity(parts.len());
    for &(s, l) in parts {
        // All parts share `T`'s dtype, checked by the caller, so this cast is the identity.
        let v: &[T] = each_dtype!(s, v => bytemuck::cast_slice(v));
        let width = l.shape()[dim] * inner;
        let part = match contiguous(v, l) {
            Some(xs) => Part::Elements(std::borrow::Cow::Borrowed(xs)),
            None if width > 0 && l.strides().iter().all(|&st| st == 0) => {
                Part::Fill(*v.get(l.offset()).ok_or_else(|| backend_error("concat", "a broadcast part's element lies past its buffer"))?)
            }
            None => Part::Elements(std::borrow::Cow::Owned(materialize(v, l)?)),
        };
        pieces.push((part, width));
    }
    let mut out = reserve("concat", outer * total)?;
    let dst = &mut out.spare_capacity_mut()[..outer * total];
    let row = |o: usize, dst: &mut [MaybeUninit<T>]| {
        let mut col = 0;
        for (part, width) in &pieces {
            part.write_row(o, *width, &mut dst[col..col + width]);
            col += width;
        }
    };
    if parallel(outer * total) && outer > 1 {
        dst.par_chunks_mut(total).enumerate().for_each(|(o, d)| row(o, d));
    } else if outer == 1 && parallel(total) {
        // One row of parts (a join along the first axis, as of an RNN's steps): the parts
        // copied on every thread, in pieces of `CHUNK`.
        let mut rest = dst;
        let mut jobs = Vec::with_capacity(pieces.len());
        for (part, width) in &pieces {
            let (d, tail) = std::mem::take(&mut rest).split_at_mut(*width);
            jobs.push((d, part));
            rest = tail;
        }
        jobs.into_par_iter().for_each(|(d, part)| {
            d.par_chunks_mut(CHUNK).enumerate().for_each(|(i, d)| match part {
                Part::Elements(xs) => d.iter_mut().zip(&xs[i * CHUNK..]).for_each(|(d, &s)| {
                    d.write(s);
                }),
                Part::Fill(v) => d.iter_mut().for_each(|d| {
                    d.write(*v);
                }),
            })
        });
    } else {
        // Written once, part after part, with no fill first: concatenation is all memory traffic.
        dst.chunks_mut(total).enumerate().for_each(|(o, d)| row(o, d));
    }
    // SAFETY: the parts' widths sum to `total` (the caller summed them into the shape), and
    // every element of every row was written above.
    unsafe { out.set_len(outer * total) };
    // The parts copied out of strided views go back to the pool.
    for (part, _) in pieces {
        if let Part::Elements(std::borrow::Cow::Owned(copy)) = part {
            crate::pool::give(copy);
        }
    }
    Ok(out)
}
