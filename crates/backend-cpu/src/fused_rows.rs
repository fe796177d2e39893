//! What the fused kernels share: their element types, matching rows of two outputs run in
//! parallel, and sums in independent lanes.

use num_traits::Float;
use rayon::prelude::*;

use crate::storage::{CpuElement, Real};
use crate::strided::parallel;

/// A float element type with its own `CpuStorage` variant.
pub(crate) trait Elem: Real + CpuElement {}
impl<T: Real + CpuElement> Elem for T {}

/// Runs `f(row, a, b)` over matching rows of `a` (rows of `wa`) and `b` (rows of `wb`), in
/// parallel when the work is large. (A "row" may be a block of several: `f` gets its index.)
pub(crate) fn rows<A: Send, B: Send>(a: &mut [A], wa: usize, b: &mut [B], wb: usize, f: impl Fn(usize, &mut [A], &mut [B]) + Sync) {
    if parallel(a.len() + b.len()) {
        a.par_chunks_mut(wa).zip(b.par_chunks_mut(wb)).enumerate().for_each(|(r, (x, y))| f(r, x, y));
    } else {
        a.chunks_mut(wa).zip(b.chunks_mut(wb)).enumerate().for_each(|(r, (x, y))| f(r, x, y));
    }
}

/// Independent running sums in [`sum_by`]: a loop adding into one waits on each add, eight
/// side by side vectorize.
const LANES: usize = 8;

/// `sum(f(x))` over `xs`, in [`LANES`] running sums.
pub(crate) fn sum_by<T: Copy, A: Float>(xs: &[T], f: impl Fn(&T) -> A) -> A {
    let mut lanes = [A::zero(); LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(s, x)| *s = *s + f(x));
    }
    chunks.remainder().iter().fold(lanes.iter().fold(A::zero(), |a, &b| a + b), |a, x| a + f(x))
}

/// The two sums of `f(x, y) = (a, b)` over `xs` and `ys` side by side, each in [`LANES`]
/// running sums.
pub(crate) fn sum_pair_by2<T: Copy, A: Float>(xs: &[T], ys: &[T], f: impl Fn(T, T) -> (A, A)) -> (A, A) {
    let (mut la, mut lb) = ([A::zero(); LANES], [A::zero(); LANES]);
    let (mut cx, mut cy) = (xs.chunks_exact(LANES), ys.chunks_exact(LANES));
    for (a, b) in (&mut cx).zip(&mut cy) {
        for i in 0..LANES {
            let (u, v) = f(a[i], b[i]);
            la[i] = la[i] + u;
            lb[i] = lb[i] + v;
        }
    }
    let head = (la.iter().fold(A::zero(), |s, &e| s + e), lb.iter().fold(A::zero(), |s, &e| s + e));
    cx.remainder().iter().zip(cy.remainder()).fold(head, |(sa, sb), (&x, &y)| {
        let (u, v) = f(x, y);
        (sa + u, sb + v)
    })
}

/// `sum(f(x, y))` over `xs` and `ys` side by side, in [`LANES`] running sums.
pub(crate) fn sum_by2<T: Copy, A: Float>(xs: &[T], ys: &[T], f: impl Fn(T, T) -> A) -> A {
    let mut lanes = [A::zero(); LANES];
    let (mut cx, mut cy) = (xs.chunks_exact(LANES), ys.chunks_exact(LANES));
    for (a, b) in (&mut cx).zip(&mut cy) {
        lanes.iter_mut().zip(a.iter().zip(b)).for_each(|(s, (&x, &y))| *s = *s + f(x, y));
    }
    let head = lanes.iter().fold(A::zero(), |a, &b| a + b);
    cx.remainder().iter().zip(cy.remainder()).fold(head, |a, (&x, &y)| a + f(x, y))
}
