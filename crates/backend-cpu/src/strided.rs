//! Walking strided views: the run plan every elementwise kernel shares, and when to go parallel.
//!
//! A [`Plan`] merges the axes of one or more same-shaped views wherever all of them are
//! contiguous across the merge, so a contiguous view becomes one long run with stride 1 (the
//! fast path needs no code of its own) and a broadcast or transposed one a few long runs.

use std::mem::MaybeUninit;

use liandan_tensor::{Layout, Result};
use rayon::prelude::*;

use crate::storage::reserve;

/// Below this many elements a kernel stays on the calling thread: fork-join costs more than
/// it saves.
pub(crate) const PAR_MIN: usize = 1 << 15;
/// Elements per parallel task.
pub(crate) const CHUNK: usize = 1 << 13;

/// Whether work of `elements` goes to the thread pool: large enough to pay for it, and a pool
/// of more than one thread (with one, handing the work to it is a wake-up and a wait for
/// nothing: the calling thread is not one of the pool's).
pub(crate) fn parallel(elements: usize) -> bool {
    elements >= PAR_MIN && rayon::current_num_threads() > 1
}

/// The walk over `K` views of one shape, as runs along the innermost merged axis.
pub(crate) struct Plan<const K: usize> {
    /// Outer merged axes, outermost first: size and per-view strides.
    outer: Vec<(usize, [usize; K])>,
    inner: usize,
    /// Per-view strides along the run.
    pub strides: [usize; K],
    offsets: [usize; K],
    pub numel: usize,
}

impl<const K: usize> Plan<K> {
    pub fn new(shape: &[usize], layouts: [&Layout; K]) -> Self {
        let mut outer: Vec<(usize, [usize; K])> = Vec::new();
        for (d, &size) in shape.iter().enumerate() {
            if size == 1 {
                continue;
            }
            let strides: [usize; K] = std::array::from_fn(|k| layouts[k].strides()[d]);
            if let Some(last) = outer.last_mut() {
                if (0..K).all(|k| last.1[k] == strides[k] * size) {
                    *last = (last.0 * size, strides);
                    continue;
                }
            }
            outer.push((size, strides));
        }
        let (inner, strides) = outer.pop().unwrap_or((1, [0; K]));
        let offsets = std::array::from_fn(|k| layouts[k].offset());
        Plan { outer, inner, strides, offsets, numel: shape.iter().product() }
    }

    /// Storage offsets of row-major element `i` in every view.
    fn offsets_at(&self, i: usize) -> [usize; K] {
        let (mut rest, col) = (i / self.inner, i % self.inner);
        let mut off: [usize; K] = std::array::from_fn(|k| self.offsets[k] + col * self.strides[k]);
        for &(size, strides) in self.outer.iter().rev() {
            let c = rest % size;
            rest /= size;
            off.iter_mut().zip(strides).for_each(|(o, s)| *o += c * s);
        }
        off
    }

    /// Calls `f(pos, offsets, n)` for each run covering elements `start..start + len`: `pos`
    /// is relative to `start`, `offsets` are where the run starts in each view, `n` its length.
    pub fn runs(&self, start: usize, len: usize, mut f: impl FnMut(usize, [usize; K], usize)) {
        let end = start + len;
        let mut i = start;
        while i < end {
            let n = (self.inner - i % self.inner).min(end - i);
            f(i - start, self.offsets_at(i), n);
            i += n;
        }
    }

    /// Whether some view reads along its rows across cache lines but down its columns along
    /// them: a transpose, which [`Plan::fill_blocked`] walks faster.
    pub fn transposed(&self) -> bool {
        self.numel > 0 && self.outer.last().is_some_and(|(_, outer)| (0..K).any(|k| self.strides[k] > 1 && outer[k] < self.strides[k]))
    }

    /// Fills `out` element by element with `f(offsets)`, in `TILE` x `TILE` blocks of the last
    /// two merged axes, each gathered into a small buffer column by column and written row by
    /// row: walking one row of a transpose would touch a cache line per element, and walking
    /// the block in place kept `TILE` lines a power-of-two stride apart, one cache set, which
    /// evicted one another (a 1024-wide transpose ran at a tenth of a plain copy).
    pub fn fill_blocked<O: Copy + Send>(&self, out: &mut [MaybeUninit<O>], f: impl Fn([usize; K]) -> O + Sync) {
        const TILE: usize = 16;
        let inner = self.inner;
        let rows_of = |first: usize, o: &mut [MaybeUninit<O>]| {
            let rows = o.len() / inner;
            let bases: [[usize; K]; TILE] = std::array::from_fn(|q| if q < rows { self.offsets_at(first + q * inner) } else { [0; K] });
            let mut tile = [[MaybeUninit::<O>::uninit(); TILE]; TILE];
            for j0 in (0..inner).step_by(TILE) {
                let width = TILE.min(inner - j0);
                for (j, column) in tile[..width].iter_mut().enumerate() {
                    for (slot, base) in column.iter_mut().zip(&bases[..rows]) {
                        slot.write(f(std::array::from_fn(|k| base[k] + (j0 + j) * self.strides[k])));
                    }
                }
                for (q, row) in o.chunks_exact_mut(inner).enumerate() {
                    for (j, slot) in row[j0..j0 + width].iter_mut().enumerate() {
                        // SAFETY: written just above, for every row `q < rows` and column `j < width`.
                        slot.write(unsafe { tile[j][q].assume_init() });
                    }
                }
            }
        };
        if parallel(out.len()) {
            out.par_chunks_mut(TILE * inner).enumerate().for_each(|(c, o)| rows_of(c * TILE * inner, o));
        } else {
            out.chunks_mut(TILE * inner).enumerate().for_each(|(c, o)| rows_of(c * TILE * inner, o));
        }
    }

    /// Fills `out` (the plan's elements, row-major) run by run, in parallel when large:
    /// `f(out_run, offsets)`.
    pub fn fill<O: Send>(&self, out: &mut [O], f: impl Fn(&mut [O], [usize; K]) + Sync) {
        debug_assert_eq!(out.len(), self.numel);
        let go = |start: usize, chunk: &mut [O]| self.runs(start, chunk.len(), |p, off, n| f(&mut chunk[p..p + n], off));
        if parallel(out.len()) {
            out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| go(c * CHUNK, chunk));
        } else {
            go(0, out);
        }
    }
}

/// The `n` results of a map over contiguous slices, into a buffer written once (no fill
/// first): in parallel chunks when large, else one loop the compiler vectorizes.
fn collect<O: Send + 'static>(n: usize, par: impl IndexedParallelIterator<Item = O>, seq: impl Iterator<Item = O>) -> Result<Vec<O>> {
    let mut out = reserve("elementwise", n)?;
    if parallel(n) {
        par.with_min_len(CHUNK).collect_into_vec(&mut out);
    } else {
        out.extend(seq);
    }
    Ok(out)
}

/// A buffer of `n` elements that `fill` writes, each exactly once, straight into fresh memory:
/// no zeroing pass first (which ran on one thread before the parallel fill, a third of a
/// strided copy's time).
fn written<O: Send + 'static>(op: &'static str, n: usize, fill: impl FnOnce(&mut [MaybeUninit<O>])) -> Result<Vec<O>> {
    let mut out = reserve(op, n)?;
    fill(&mut out.spare_capacity_mut()[..n]);
    // SAFETY: every caller's `fill` is `Plan::fill` or `Plan::fill_blocked` over the plan's
    // `n` elements, which hand each index out once, and every closure below writes each
    // element it is handed.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// `f` over one view.
pub(crate) fn map1<A, O>(a: &[A], la: &Layout, f: impl Fn(A) -> O + Sync) -> Result<Vec<O>>
where
    A: Copy + Sync,
    O: Copy + Default + Send + 'static,
{
    if let Some(xs) = contiguous(a, la) {
        return collect(xs.len(), xs.par_iter().map(|&x| f(x)), xs.iter().map(|&x| f(x)));
    }
    let plan = Plan::new(la.shape(), [la]);
    written("elementwise", plan.numel, |out| {
        if plan.transposed() {
            return plan.fill_blocked(out, |[i]| f(a[i]));
        }
        plan.fill(out, |o, [i]| {
            let n = o.len();
            match plan.strides {
                [1] => o.iter_mut().zip(&a[i..i + n]).for_each(|(o, &x)| {
                    o.write(f(x));
                }),
                [s] => o.iter_mut().enumerate().for_each(|(j, o)| {
                    o.write(f(a[i + j * s]));
                }),
            }
        })
    })
}

/// `f` over two views of one shape.
pub(crate) fn map2<A, B, O>(a: &[A], la: &Layout, b: &[B], lb: &Layout, f: impl Fn(A, B) -> O + Sync) -> Result<Vec<O>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Copy + Default + Send + 'static,
{
    if let (Some(xs), Some(ys)) = (contiguous(a, la), contiguous(b, lb)) {
        let par = xs.par_iter().zip(ys).map(|(&x, &y)| f(x, y));
        return collect(xs.len(), par, xs.iter().zip(ys).map(|(&x, &y)| f(x, y)));
    }
    let plan = Plan::new(la.shape(), [la, lb]);
    written("elementwise", plan.numel, |out| {
        if plan.transposed() {
            return plan.fill_blocked(out, |[i, k]| f(a[i], b[k]));
        }
        plan.fill(out, |o, [i, k]| {
            let n = o.len();
            // A broadcast operand is read once per run, outside the loop: indexed inside it,
            // its bounds check kept the loop from vectorizing (a scalar op ran 6x slower than
            // an add of two buffers).
            match plan.strides {
                [1, 1] => o.iter_mut().zip(&a[i..i + n]).zip(&b[k..k + n]).for_each(|((o, &x), &y)| {
                    o.write(f(x, y));
                }),
                [1, 0] => {
                    let y = b[k];
                    o.iter_mut().zip(&a[i..i + n]).for_each(|(o, &x)| {
                        o.write(f(x, y));
                    })
                }
                [0, 1] => {
                    let x = a[i];
                    o.iter_mut().zip(&b[k..k + n]).for_each(|(o, &y)| {
                        o.write(f(x, y));
                    })
                }
                [sa, sb] => o.iter_mut().enumerate().for_each(|(j, o)| {
                    o.write(f(a[i + j * sa], b[k + j * sb]));
                }),
            }
        })
    })
}

/// `f` over three views of one shape.
pub(crate) fn map3<A, B, C, O>(a: &[A], la: &Layout, b: &[B], lb: &Layout, c: &[C], lc: &Layout, f: impl Fn(A, B, C) -> O + Sync) -> Result<Vec<O>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    O: Copy + Default + Send + 'static,
{
    if let (Some(xs), Some(ys), Some(zs)) = (contiguous(a, la), contiguous(b, lb), contiguous(c, lc)) {
        let par = xs.par_iter().zip(ys).zip(zs).map(|((&x, &y), &z)| f(x, y, z));
        return collect(xs.len(), par, xs.iter().zip(ys).zip(zs).map(|((&x, &y), &z)| f(x, y, z)));
    }
    let plan = Plan::new(la.shape(), [la, lb, lc]);
    written("elementwise", plan.numel, |out| {
        if plan.transposed() {
            return plan.fill_blocked(out, |[i, j, k]| f(a[i], b[j], c[k]));
        }
        plan.fill(out, |o, [i, j, k]| {
            let n = o.len();
            // Dense runs, and runs against one broadcast operand (a select with a constant
            // side), as slices the loop can vectorize; any other strides index per element.
            match plan.strides {
                [1, 1, 1] => o.iter_mut().zip(&a[i..i + n]).zip(&b[j..j + n]).zip(&c[k..k + n]).for_each(|(((o, &x), &y), &z)| {
                    o.write(f(x, y, z));
                }),
                [1, 1, 0] => {
                    let z = c[k];
                    o.iter_mut().zip(&a[i..i + n]).zip(&b[j..j + n]).for_each(|((o, &x), &y)| {
                        o.write(f(x, y, z));
                    })
                }
                [1, 0, 1] => {
                    let y = b[j];
                    o.iter_mut().zip(&a[i..i + n]).zip(&c[k..k + n]).for_each(|((o, &x), &z)| {
                        o.write(f(x, y, z));
                    })
                }
                [sa, sb, sc] => o.iter_mut().enumerate().for_each(|(q, o)| {
                    o.write(f(a[i + q * sa], b[j + q * sb], c[k + q * sc]));
                }),
            }
        })
    })
}

/// The view's elements in row-major order, as a fresh `Vec`.
pub(crate) fn materialize<T: Copy + Default + Send + Sync + 'static>(data: &[T], layout: &Layout) -> Result<Vec<T>> {
    match contiguous(data, layout) {
        Some(s) => {
            let mut v = reserve("copy", s.len())?;
            v.extend_from_slice(s);
            Ok(v)
        }
        None => map1(data, layout, |x| x),
    }
}

/// The view as a plain slice, when it is one.
pub(crate) fn contiguous<'a, T>(data: &'a [T], layout: &Layout) -> Option<&'a [T]> {
    layout.is_contiguous().then(|| &data[layout.offset()..layout.offset() + layout.numel()])
}

/// Runs `f` on the view as a slice. The contract says the view is contiguous; a strided one
/// is copied rather than trusted.
pub(crate) fn with_contiguous<T: Copy + Default + Send + Sync + 'static, R>(v: &[T], l: &Layout, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    match contiguous(v, l) {
        Some(xs) => Ok(f(xs)),
        None => {
            let copy = materialize(v, l)?;
            let r = f(&copy);
            crate::pool::give(copy);
            Ok(r)
        }
    }
}

/// Records the first bad index a parallel kernel meets, so it can finish and then fail.
#[derive(Default)]
pub(crate) struct Fault(std::sync::Mutex<Option<(i64, usize)>>);

impl Fault {
    pub fn set(&self, index: i64, size: usize) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.get_or_insert((index, size));
    }

    pub fn check(self, op: &'static str) -> liandan_tensor::Result<()> {
        match self.0.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some((index, size)) => Err(liandan_tensor::Error::IndexOutOfRange { op, index, size }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_merges_contiguous_and_walks_transpose() {
        let l = Layout::contiguous(&[2, 3, 4]);
        let p = Plan::new(l.shape(), [&l]);
        assert!(p.outer.is_empty() && p.inner == 24 && p.strides == [1]);
        let t = Layout::contiguous(&[3, 4]).permute(&[1, 0]).unwrap();
        let data: Vec<i64> = (0..12).collect();
        assert_eq!(map1(&data, &t, |x| x).unwrap(), vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
        let big = Layout::new(vec![300, 200], vec![1, 300], 5);
        let data: Vec<i64> = (0..60_005).collect();
        let want: Vec<i64> = big.indices().map(|i| i as i64).collect();
        assert_eq!(map1(&data, &big, |x| x).unwrap(), want);
        let empty = Layout::contiguous(&[0, 5]).permute(&[1, 0]).unwrap();
        assert!(map1(&data, &empty, |x| x).unwrap().is_empty());
    }
}
