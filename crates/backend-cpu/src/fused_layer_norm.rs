//! Fused layer normalization (`liandan_tensor::ops::LayerNorm` and its gradient,
//! `LayerNormBackward`): one row at a time, its statistics in two passes and its
//! output in a third, in the dtype's wide type (f32 for halves), rows in parallel when large.
//! Dimension letters: `x` is `[R, D]`, `D` the normalized width.

use liandan_tensor::{LayerNormOptions, Result, Strided};
use num_traits::{Float, One, Zero};

use crate::fused_rows::{rows, sum_by, Elem};
use crate::kernel::slices;
use crate::scalar::Scalar;
use crate::storage::{alloc_overwritten, CpuStorage};
use crate::strided::CHUNK;

fn wrap<T: Elem>(v: Vec<T>) -> CpuStorage {
    T::wrap(v.into())
}

/// `D` as the wide type.
fn width<A: Float>(d: usize) -> A {
    A::from(d).expect("a row width is a float")
}

/// Runs `f(first_row, rows_out, stats_out)` over pieces of whole rows of `out` (width `d`)
/// and the matching entries of `stats`, in parallel pieces when large.
fn row_pieces<T: Send, S: Send>(out: &mut [T], stats: &mut [S], d: usize, f: impl Fn(usize, &mut [T], &mut [S]) + Sync) {
    let n = (CHUNK / d).max(1);
    rows(out, n * d, stats, n, |p, o, s| f(p * n, o, s));
}

/// `LayerNorm`: x [, weight][, bias] to y, mean, rstd.
pub(crate) fn layer_norm<T: Elem>(o: &LayerNormOptions, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("layer_norm", inputs)?;
    let (x, d) = (&v[0], o.width.max(1));
    let weight = o.weight.then(|| &v[1]);
    let bias = o.bias.then(|| &v[1 + o.weight as usize]);
    let eps = <T::Acc as Scalar>::from_f64(o.eps);
    let mut y = alloc_overwritten("layer_norm", x.len(), T::default())?;
    let mut stats = vec![(T::default(), T::default()); x.len() / d];
    row_pieces(&mut y, &mut stats, d, |first, ys, ss| {
        for (r, (y, s)) in ys.chunks_exact_mut(d).zip(ss.iter_mut()).enumerate() {
            let row = &x[(first + r) * d..(first + r + 1) * d];
            let mean = sum_by(row, |e| e.widen()) / width(d);
            let var = sum_by(row, |e| (e.widen() - mean) * (e.widen() - mean)) / width(d);
            let rstd = (var + eps).sqrt().recip();
            for (j, (y, e)) in y.iter_mut().zip(row).enumerate() {
                let mut out = (e.widen() - mean) * rstd;
                if let Some(w) = weight {
                    out = out * w[j].widen();
                }
                if let Some(b) = bias {
                    out += b[j].widen();
                }
                *y = T::narrow(out);
            }
            *s = (T::narrow(mean), T::narrow(rstd));
        }
    });
    let (mean, rstd): (Vec<T>, Vec<T>) = stats.into_iter().unzip();
    Ok(vec![wrap(y), wrap(mean), wrap(rstd)])
}

/// `LayerNormBackward`: x, dy, mean, rstd [, weight] to dx [, dweight][, dbias].
pub(crate) fn layer_norm_backward<T: Elem>(o: &LayerNormOptions, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("layer_norm_backward", inputs)?;
    let (x, dy, d) = (&v[0], &v[1], o.width.max(1));
    let weight = o.weight.then(|| &v[4]);
    let stat = |k: usize, r: usize| v[k][r].widen();
    let mut dx = alloc_overwritten("layer_norm", x.len(), T::default())?;
    // Row positions, for the row sums of `g` and `g xhat` in `sum_by`'s lanes.
    let idx: Vec<usize> = (0..d).collect();
    // No statistics come out of the backward: zero-sized placeholders for `row_pieces`.
    let mut unused = vec![(); x.len() / d];
    row_pieces(&mut dx, &mut unused, d, |first, dxs, _| {
        for (r, dx) in dxs.chunks_exact_mut(d).enumerate() {
            let (at, (mean, rstd)) = ((first + r) * d, (stat(2, first + r), stat(3, first + r)));
            let g = |j: usize| dy[at + j].widen() * weight.map_or(T::Acc::one(), |w| w[j].widen());
            let xhat = |j: usize| (x[at + j].widen() - mean) * rstd;
            let (mean_g, mean_gx) = (sum_by(&idx, |&j| g(j)) / width(d), sum_by(&idx, |&j| g(j) * xhat(j)) / width(d));
            for (j, dx) in dx.iter_mut().enumerate() {
                *dx = T::narrow(rstd * (g(j) - mean_g - xhat(j) * mean_gx));
            }
        }
    });
    let mut outs = vec![wrap(dx)];
    if o.weight || o.bias {
        // Sums down the rows, one pass in row order (the sums are D long, the rows many).
        let (mut dweight, mut dbias) = (vec![T::Acc::zero(); d], vec![T::Acc::zero(); d]);
        for r in 0..x.len() / d {
            let (mean, rstd) = (stat(2, r), stat(3, r));
            for j in 0..d {
                let e = dy[r * d + j].widen();
                dweight[j] += e * (x[r * d + j].widen() - mean) * rstd;
                dbias[j] += e;
            }
        }
        let narrow = |s: Vec<T::Acc>| wrap(s.into_iter().map(T::narrow).collect::<Vec<T>>());
        outs.extend(o.weight.then(|| narrow(dweight)));
        outs.extend(o.bias.then(|| narrow(dbias)));
    }
    Ok(outs)
}
