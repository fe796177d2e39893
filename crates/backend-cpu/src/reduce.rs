//! Reductions along the middle axis of `[outer, len, inner]`: sum, max, min, argmax, argmin,
//! with branch-free multi-lane loops when that axis is the last (`inner == 1`).

use liandan_tensor::backend::ReduceOp;
use liandan_tensor::{DType, Error, Layout, Result, Strided};
use rayon::prelude::*;

use crate::storage::{alloc, bad_dtype, collect_n, cpu, each_dtype, map_dtype, reserve, slice, CpuStorage, Real, Scalar};
use crate::strided::{map1, parallel, with_contiguous, CHUNK, PAR_MIN};

pub(crate) fn reduce(op: ReduceOp, x: &CpuStorage, l: &Layout) -> Result<CpuStorage> {
    let dims = match *l.shape() {
        [outer, len, inner] => [outer, len, inner],
        _ => return Err(Error::BadShape { op: "reduce", shape: l.shape().to_vec(), detail: "expected [outer, len, inner]".into() }),
    };
    use CpuStorage as S;
    Ok(match op {
        ReduceOp::Sum => match x {
            S::F32(v) => S::F32(sum_f32(slice(v), l, dims)?.into()),
            S::F16(v) => S::F16(sum_float(slice(v), l, dims)?.into()),
            S::BF16(v) => S::BF16(sum_float(slice(v), l, dims)?.into()),
            S::F64(v) => S::F64(sum_float(slice(v), l, dims)?.into()),
            S::I64(v) => S::I64(sum_int(slice(v), l, dims)?.into()),
            S::U8(v) | S::Bool(v) => S::I64(sum_int(slice(v), l, dims)?.into()),
        },
        ReduceOp::Max => map_dtype!(x, v => extreme_value(v, l, dims, gt)?),
        ReduceOp::Min => map_dtype!(x, v => extreme_value(v, l, dims, lt)?),
        ReduceOp::ArgMax => S::I64(each_dtype!(x, v => indices(extreme(v, l, dims, gt)?)?).into()),
        ReduceOp::ArgMin => S::I64(each_dtype!(x, v => indices(extreme(v, l, dims, lt)?)?).into()),
    })
}

/// The indices of [`extreme`]'s winners.
fn indices<T: Send + 'static>(found: Vec<(T, i64)>) -> Result<Vec<i64>> {
    let indices = collect_n("argmax", found.len(), found.iter().map(|a| a.1));
    crate::pool::give(found);
    indices
}

/// Float sums accumulate in f64 whatever the dtype: the reference backend should not be the
/// one that loses digits on a long row.
fn sum_float<T: Scalar>(v: &[T], l: &Layout, dims: [usize; 3]) -> Result<Vec<T>> {
    let acc = with_contiguous(v, l, |xs| match dims {
        // A row at a time: `LANES` running sums, so the loop vectorizes rather than waiting on
        // one add after another.
        [_, _, 1] => fold_rows(xs, dims, |row| {
            let mut lanes = [0.0f64; LANES];
            let mut chunks = row.chunks_exact(LANES);
            for c in &mut chunks {
                lanes.iter_mut().zip(c).for_each(|(a, x)| *a += x.to_f64());
            }
            chunks.remainder().iter().fold(lanes.iter().sum::<f64>(), |a, x| a + x.to_f64())
        }),
        _ => fold_lanes(xs, dims, 0.0f64, |a, x, _| a + x.to_f64(), |a, b| a + b),
    })??;
    let sums = collect_n("sum", acc.len(), acc.iter().map(|&a| T::from_f64(a)));
    crate::pool::give(acc);
    sums
}

/// [`sum_float`] for f32, whose sums over a middle axis (a bias gradient's column sums) run in
/// vector lanes (`vmath::add_rows_f64`): the generic fold stayed on the baseline's two f64
/// lanes. The same f64 sums in the same order, split over the threads as `fold_lanes` splits
/// ([`lane_blocks`]).
fn sum_f32(v: &[f32], l: &Layout, dims: [usize; 3]) -> Result<Vec<f32>> {
    let [outer, len, inner] = dims;
    if inner == 1 || len == 0 {
        return sum_float(v, l, dims);
    }
    let acc = with_contiguous(v, l, |xs| -> Result<Vec<f64>> {
        let mut out = alloc("sum", outer * inner, 0.0f64)?;
        lane_blocks(&mut out, inner, parallel(outer * len * inner), |o, i0, acc| crate::vmath::add_rows_f64(acc, &xs[o * len * inner + i0..], len, inner));
        Ok(out)
    })??;
    let sums = collect_n("sum", acc.len(), acc.iter().map(|&a| a as f32));
    crate::pool::give(acc);
    sums
}

/// Independent accumulators per row of a last-axis reduction.
const LANES: usize = 8;

/// `row(x[o, :])` for every `o` of a contiguous `[outer, len, 1]` slice, rows in parallel when
/// the work is large.
fn fold_rows<T: Sync, A: Clone + Default + Send + 'static>(xs: &[T], [outer, len, _]: [usize; 3], row: impl Fn(&[T]) -> A + Sync + Send) -> Result<Vec<A>> {
    if len == 0 {
        return collect_n("reduce", outer, (0..outer).map(|_| row(&[])));
    }
    if parallel(outer * len) && outer > 1 {
        let mut out = reserve("reduce", outer)?;
        xs.par_chunks(len).map(&row).collect_into_vec(&mut out);
        Ok(out)
    } else {
        collect_n("reduce", outer, xs.chunks(len).map(row))
    }
}

/// Max or min without the index, a row at a time in `LANES` running extremes (which vectorize)
/// when the reduced axis is the last. NaN wins, as in [`gt`], so once a lane holds one it keeps it.
fn extreme_value<T: Scalar>(v: &[T], l: &Layout, dims: [usize; 3], beats: impl Fn(T, T) -> bool + Copy + Sync + Send) -> Result<Vec<T>> {
    let [_, len, inner] = dims;
    if inner != 1 || len == 0 {
        let found = extreme(v, l, dims, beats)?;
        let values = collect_n("max", found.len(), found.iter().map(|a| a.0));
        crate::pool::give(found);
        return values;
    }
    let pick = move |a: T, x: T| if beats(x, a) { x } else { a };
    with_contiguous(v, l, |xs| {
        fold_rows(xs, dims, |row| {
            let mut lanes = [row[0]; LANES];
            let mut chunks = row.chunks_exact(LANES);
            for c in &mut chunks {
                lanes.iter_mut().zip(c).for_each(|(a, &x)| *a = pick(*a, x));
            }
            chunks.remainder().iter().chain(&lanes).fold(row[0], |a, &x| pick(a, x))
        })
    })?
}

fn sum_int<T: Scalar>(v: &[T], l: &Layout, dims: [usize; 3]) -> Result<Vec<i64>> {
    with_contiguous(v, l, |xs| fold_lanes(xs, dims, 0i64, |a, x, _| a.wrapping_add(x.to_i64()), i64::wrapping_add))?
}

/// Whether `new` beats `cur` for a max. NaN beats everything, as in PyTorch, and ties keep the
/// earlier element, so argmax is the first occurrence.
pub(crate) fn gt<T: Scalar>(new: T, cur: T) -> bool {
    new > cur || (new.is_nan() && !cur.is_nan())
}

fn lt<T: Scalar>(new: T, cur: T) -> bool {
    new < cur || (new.is_nan() && !cur.is_nan())
}

/// The winning value and its index along `len` for every lane; index -1 marks "none yet".
fn extreme<T: Scalar>(v: &[T], l: &Layout, dims: [usize; 3], beats: impl Fn(T, T) -> bool + Copy + Sync + Send) -> Result<Vec<(T, i64)>> {
    let init = (T::default(), -1i64);
    with_contiguous(v, l, |xs| {
        fold_lanes(
            xs,
            dims,
            init,
            |a, x, i| if a.1 < 0 || beats(x, a.0) { (x, i as i64) } else { a },
            // `a` holds the earlier indices, so it keeps ties.
            |a, b| if b.1 >= 0 && (a.1 < 0 || beats(b.0, a.0)) { b } else { a },
        )
    })?
}

/// Folds every lane `x[o, :, i]` of the contiguous `[outer, len, inner]` slice with `step(acc,
/// value, index)`. `combine` joins the folds of consecutive pieces of one lane, which is how a
/// single long lane is split across threads; `init` must be its identity.
fn fold_lanes<T, A>(
    xs: &[T],
    [outer, len, inner]: [usize; 3],
    init: A,
    step: impl Fn(A, T, usize) -> A + Sync,
    combine: impl Fn(A, A) -> A + Sync,
) -> Result<Vec<A>>
where
    T: Copy + Sync,
    A: Copy + Send + Sync + 'static,
{
    let mut out = alloc("reduce", outer * inner, init)?;
    if out.is_empty() {
        return Ok(out);
    }
    let par = parallel(outer * len * inner);
    if inner == 1 {
        let fold_run = |run: &[T], first: usize| run.iter().enumerate().fold(init, |a, (j, &x)| step(a, x, first + j));
        let lane = |o: usize| {
            let run = &xs[o * len..(o + 1) * len];
            if len >= PAR_MIN && outer < rayon::current_num_threads() {
                run.par_chunks(CHUNK).enumerate().map(|(c, piece)| fold_run(piece, c * CHUNK)).reduce(|| init, &combine)
            } else {
                fold_run(run, 0)
            }
        };
        if par {
            out.par_iter_mut().enumerate().for_each(|(o, a)| *a = lane(o));
        } else {
            out.iter_mut().enumerate().for_each(|(o, a)| *a = lane(o));
        }
        return Ok(out);
    }
    // Lanes side by side: walk `len` rows, updating a block of accumulators from each row,
    // so memory is read in order.
    let block = |o: usize, i0: usize, acc: &mut [A]| {
        for j in 0..len {
            let row = &xs[(o * len + j) * inner + i0..][..acc.len()];
            acc.iter_mut().zip(row).for_each(|(a, &x)| *a = step(*a, x, j));
        }
    };
    lane_blocks(&mut out, inner, par, block);
    Ok(out)
}

/// `block(o, i0, acc)` over `out`'s rows of `inner` lanes (`o` the row, `i0` the first lane of
/// `acc`): in parallel where `par`, in blocks of lanes small enough for every thread to take
/// some (a bias gradient's 1,024 columns are one block of CHUNK, one thread's work), each
/// still a few cache lines of every row; every lane is still folded in row order, so the
/// result does not depend on the threads.
fn lane_blocks<A: Send>(out: &mut [A], inner: usize, par: bool, block: impl Fn(usize, usize, &mut [A]) + Sync) {
    if par {
        let lanes_per = inner.div_ceil(rayon::current_num_threads()).next_multiple_of(16).clamp(64, CHUNK);
        out.par_chunks_mut(inner).enumerate().for_each(|(o, lanes)| {
            lanes.par_chunks_mut(lanes_per).enumerate().for_each(|(c, acc)| block(o, c * lanes_per, acc));
        });
    } else {
        out.chunks_mut(inner).enumerate().for_each(|(o, lanes)| block(o, 0, lanes));
    }
}

/// `ops::SumRowsWide`: an f16 or bf16 `x [.., C]` summed over every axis but the last into f32
/// `[C]`: widened, then summed as f32 (unrounded at the end, where the half sums round).
pub(crate) fn sum_rows_wide(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let x = match inputs {
        [x] if matches!(x.dtype, DType::F16 | DType::BF16) => x,
        [x] => return Err(bad_dtype("sum_rows_wide", x.dtype, "an f16 or bf16 operand")),
        _ => return Err(Error::BadShape { op: "sum_rows_wide", shape: vec![inputs.len()], detail: "takes one operand".into() }),
    };
    let Some((&c, lead)) = x.layout.shape().split_last() else {
        return Err(Error::BadShape { op: "sum_rows_wide", shape: vec![], detail: "needs at least one axis".into() });
    };
    let rows: usize = lead.iter().product();
    let wide = match cpu(x.storage) {
        CpuStorage::F16(v) => map1(slice(v), x.layout, Real::widen)?,
        CpuStorage::BF16(v) => map1(slice(v), x.layout, Real::widen)?,
        other => return Err(bad_dtype("sum_rows_wide", other.dtype(), "an f16 or bf16 operand")),
    };
    let wide = CpuStorage::F32(wide.into());
    Ok(vec![reduce(ReduceOp::Sum, &wide, &Layout::new(vec![1, rows, c], vec![rows * c, c, 1], 0))?])
}
