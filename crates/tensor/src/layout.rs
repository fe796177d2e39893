//! How a tensor's elements sit in its storage: shape, strides (in elements) and offset.
//!
//! Views (reshape, permute, narrow, expand, squeeze) only build a new [`Layout`] over the same
//! storage. A stride of 0 repeats an element, which is how broadcasting costs no memory.

use smallvec::SmallVec;

use crate::error::{Error, Result};

/// A shape's or a layout's strides, inline up to six axes: a layout is made for every op, and
/// heap vectors made two allocations each time.
pub(crate) type Dims = SmallVec<[usize; 6]>;

/// Shape, strides and offset of a strided view, all counted in elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Dims,
    strides: Dims,
    offset: usize,
}

/// The most elements (and the largest stride) a shape may have: Rust allocations stop at
/// `isize::MAX` bytes, so a shape past it cannot be real, even with a zero dim elsewhere.
pub const MAX_ELEMENTS: usize = isize::MAX as usize;

/// Checks that `shape`'s element count and row-major strides fit in [`MAX_ELEMENTS`], and
/// returns the element count. Every shape that enters the crate from outside (creation, files,
/// reshape, expand) passes here, so the unchecked arithmetic of [`Layout`] cannot overflow.
///
/// The product of the non-zero dims bounds every stride: `[0, 2^32, 2^32]` holds no element,
/// but its first stride would be 2^64.
pub fn check_shape(op: &'static str, shape: &[usize]) -> Result<usize> {
    let mut nonzero = 1usize;
    for &d in shape.iter().filter(|&&d| d != 0) {
        nonzero = nonzero
            .checked_mul(d)
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| Error::bad_shape(op, shape, format!("is too large: its element count or strides pass {MAX_ELEMENTS} (isize::MAX)")))?;
    }
    Ok(if shape.contains(&0) { 0 } else { nonzero })
}

/// Row-major (C order) strides of `shape`. Saturating, so that a shape that skipped
/// [`check_shape`] gives nonsense strides for an empty tensor rather than a panic.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    strides_of(shape).to_vec()
}

fn strides_of(shape: &[usize]) -> Dims {
    let mut strides: Dims = smallvec::smallvec![0; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d);
    }
    strides
}

impl Layout {
    /// A row-major layout of `shape` starting at element 0.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout { shape: Dims::from_slice(shape), strides: strides_of(shape), offset: 0 }
    }

    /// A layout from its parts. The caller vouches that it stays inside its storage.
    pub fn new(shape: impl AsRef<[usize]>, strides: impl AsRef<[usize]>, offset: usize) -> Self {
        let (shape, strides) = (shape.as_ref(), strides.as_ref());
        assert_eq!(shape.len(), strides.len(), "layout: shape and strides differ in rank");
        Layout { shape: Dims::from_slice(shape), strides: Dims::from_slice(strides), offset }
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> usize {
        // Zero first: `[2^40, 2^40, 0]` is empty, and a left-to-right product would overflow.
        if self.shape.contains(&0) {
            0
        } else {
            self.shape.iter().product()
        }
    }

    /// True when the elements are densely packed in row-major order (size-1 dims may have any
    /// stride). The offset may be non-zero.
    pub fn is_contiguous(&self) -> bool {
        let mut acc = 1;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d != 1 && s != acc {
                return false;
            }
            acc = acc.saturating_mul(d);
        }
        true
    }

    /// The storage index of the element at multi-index `idx`.
    pub fn index_of(&self, idx: &[usize]) -> usize {
        self.offset + idx.iter().zip(&self.strides).map(|(i, s)| i * s).sum::<usize>()
    }

    /// Storage indices of every element in row-major order. Used by reference code and by
    /// backends for the general strided case.
    pub fn indices(&self) -> StridedIndex<'_> {
        StridedIndex::new(self)
    }

    /// One past the largest storage index this layout touches (0 for an empty tensor).
    pub fn max_extent(&self) -> usize {
        if self.numel() == 0 {
            return 0;
        }
        self.offset + self.shape.iter().zip(&self.strides).map(|(d, s)| (d - 1) * s).sum::<usize>() + 1
    }

    /// Reorders the axes: axis `i` of the result is axis `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Result<Layout> {
        let rank = self.rank();
        let mut seen = vec![false; rank];
        if perm.len() != rank || perm.iter().any(|&p| p >= rank || std::mem::replace(&mut seen[p], true)) {
            return Err(Error::bad_shape("permute", &self.shape, format!("{perm:?} is not a permutation of 0..{rank}")));
        }
        Ok(Layout { shape: perm.iter().map(|&p| self.shape[p]).collect(), strides: perm.iter().map(|&p| self.strides[p]).collect(), offset: self.offset })
    }

    /// The sub-range `start..start + len` of axis `dim`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Layout> {
        let size = self.shape[dim];
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::bad_shape("narrow", &self.shape, format!("range {start}..{} exceeds dim {dim} of size {size}", start as u128 + len as u128)));
        }
        let mut out = self.clone();
        out.offset += start * self.strides[dim];
        out.shape[dim] = len;
        Ok(out)
    }

    /// Broadcasts to `shape` (numpy rules: align right, size-1 or missing axes repeat).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Layout> {
        let err = || Error::shape("broadcast_to", &self.shape, shape, "cannot be broadcast: sizes must match or be 1");
        check_shape("broadcast_to", shape)?;
        if shape.len() < self.rank() {
            return Err(err());
        }
        let lead = shape.len() - self.rank();
        let mut strides: Dims = smallvec::smallvec![0; shape.len()];
        for (i, &d) in shape.iter().enumerate().skip(lead) {
            let src = self.shape[i - lead];
            strides[i] = if src == d {
                self.strides[i - lead]
            } else if src == 1 {
                0
            } else {
                return Err(err());
            };
        }
        Ok(Layout { shape: Dims::from_slice(shape), strides, offset: self.offset })
    }

    /// A reshape that keeps the same storage, if the strides allow it; `None` if a copy is needed.
    pub fn reshape(&self, shape: &[usize]) -> Option<Layout> {
        if self.is_contiguous() {
            return Some(Layout { shape: Dims::from_slice(shape), strides: strides_of(shape), offset: self.offset });
        }
        // Merge runs of source axes that are contiguous with each other, then split them.
        // This is the same rule as numpy's `_attempt_nocopy_reshape`.
        let src: SmallVec<[(usize, usize); 6]> = self.shape.iter().copied().zip(self.strides.iter().copied()).filter(|&(d, _)| d != 1).collect();
        let dst = Dims::from_slice(shape);
        let mut strides: Dims = smallvec::smallvec![0; dst.len()];
        let (mut si, mut di) = (0, 0);
        while si < src.len() && di < dst.len() {
            if dst[di] == 1 {
                strides[di] = 0;
                di += 1;
                continue;
            }
            let (mut np, mut op) = (src[si].0, dst[di]);
            let (si0, di0) = (si, di);
            while np != op {
                if np < op {
                    si += 1;
                    np *= src.get(si)?.0;
                } else {
                    di += 1;
                    op *= *dst.get(di)?;
                }
            }
            for k in si0..si {
                if src[k].1 != src[k + 1].0 * src[k + 1].1 {
                    return None;
                }
            }
            strides[di] = src[si].1;
            for k in (di0..di).rev() {
                strides[k] = strides[k + 1] * dst[k + 1];
            }
            si += 1;
            di += 1;
        }
        while di < dst.len() {
            if dst[di] != 1 {
                return None;
            }
            di += 1;
        }
        if si != src.len() {
            return None;
        }
        Some(Layout { shape: dst, strides, offset: self.offset })
    }
}

/// Iterator over the storage indices of a [`Layout`] in row-major order.
pub struct StridedIndex<'a> {
    layout: &'a Layout,
    idx: Vec<usize>,
    next: Option<usize>,
}

impl<'a> StridedIndex<'a> {
    fn new(layout: &'a Layout) -> Self {
        let next = if layout.numel() == 0 { None } else { Some(layout.offset) };
        StridedIndex { layout, idx: vec![0; layout.rank()], next }
    }
}

impl Iterator for StridedIndex<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let cur = self.next?;
        let (shape, strides) = (&self.layout.shape, &self.layout.strides);
        let mut pos = cur;
        let mut d = shape.len();
        loop {
            if d == 0 {
                self.next = None;
                break;
            }
            d -= 1;
            self.idx[d] += 1;
            pos += strides[d];
            if self.idx[d] < shape[d] {
                self.next = Some(pos);
                break;
            }
            pos -= strides[d] * self.idx[d];
            self.idx[d] = 0;
        }
        Some(cur)
    }
}

/// The broadcast shape of two shapes, or an error naming both.
pub fn broadcast_shapes(op: &'static str, lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    broadcast_dims(op, lhs, rhs).map(|d| d.to_vec())
}

/// [`broadcast_shapes`] inline.
pub(crate) fn broadcast_dims(op: &'static str, lhs: &[usize], rhs: &[usize]) -> Result<Dims> {
    let rank = lhs.len().max(rhs.len());
    let mut out: Dims = smallvec::smallvec![0; rank];
    for i in 0..rank {
        let l = if i + lhs.len() >= rank { lhs[i + lhs.len() - rank] } else { 1 };
        let r = if i + rhs.len() >= rank { rhs[i + rhs.len() - rank] } else { 1 };
        out[i] = match (l, r) {
            (l, r) if l == r => l,
            (1, r) => r,
            (l, 1) => l,
            _ => {
                return Err(Error::shape(op, lhs, rhs, format!("cannot be broadcast together: dim {i} of the result is {l} vs {r}")));
            }
        };
    }
    check_shape(op, &out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_index_walks_a_transpose() {
        let l = Layout::contiguous(&[2, 3]).permute(&[1, 0]).unwrap();
        assert_eq!(l.indices().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn reshape_without_copy_when_strides_allow() {
        let l = Layout::contiguous(&[4, 6]).narrow(1, 0, 3).unwrap(); // [4,3] strides [6,1]
        assert!(l.reshape(&[12]).is_none());
        assert_eq!(l.reshape(&[2, 2, 3]).unwrap().strides(), &[12, 6, 1]);
        let t = Layout::contiguous(&[2, 3, 4]).permute(&[0, 2, 1]).unwrap();
        assert!(t.reshape(&[2, 12]).is_none());
        assert_eq!(t.reshape(&[2, 4, 3, 1]).unwrap().strides()[..3], [12, 1, 4]);
    }

    #[test]
    fn shapes_past_isize_max_are_errors_not_overflows() {
        let big = 1usize << 32;
        for shape in [&[0, big, big][..], &[big, big, 0], &[usize::MAX, 2], &[MAX_ELEMENTS, 2], &[3, 0, MAX_ELEMENTS / 2]] {
            let e = check_shape("t", shape).unwrap_err().to_string();
            assert!(e.contains("too large"), "{shape:?}: {e}");
        }
        assert_eq!(check_shape("t", &[0, big, 1 << 30]).unwrap(), 0);
        assert_eq!(check_shape("t", &[MAX_ELEMENTS, 1]).unwrap(), MAX_ELEMENTS);
        assert_eq!(check_shape("t", &[]).unwrap(), 1);
        assert_eq!(Layout::contiguous(&[big, big, 0]).numel(), 0);
        assert!(Layout::contiguous(&[1, 1]).broadcast_to(&[big, big]).is_err());
        assert!(broadcast_shapes("add", &[big, 1], &[1, big]).is_err());
    }

    #[test]
    fn broadcast_rules() {
        assert_eq!(broadcast_shapes("add", &[3, 1], &[4]).unwrap(), vec![3, 4]);
        let e = broadcast_shapes("add", &[3, 2], &[4]).unwrap_err().to_string();
        assert!(e.contains("[3, 2]") && e.contains("[4]"), "{e}");
        let b = Layout::contiguous(&[3, 1]).broadcast_to(&[2, 3, 4]).unwrap();
        assert_eq!(b.strides(), &[0, 1, 0]);
    }
}
