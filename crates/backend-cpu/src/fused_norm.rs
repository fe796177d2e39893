//! Fused batch normalization in training (`liandan_tensor::ops::BatchNormTrain` and its
//! gradient, `BatchNormBackward`): per channel, the statistics in two passes over its values
//! (in f64, whatever the dtype; f32's gradient in the CPU's widest vector lanes), then one pass
//! writing the output; channels run in parallel.
//! Dimension letters: `x` is `[N, C, L]`, `M = N L` values per channel.

use liandan_tensor::{BatchNormOptions, Result, Strided};
use rayon::prelude::*;

use crate::fused_rows::{sum_by, sum_by2, sum_pair_by2, Elem};
use crate::kernel::slices;
use crate::scalar::{as_f32, as_f32_mut, Scalar};
use crate::storage::{alloc_overwritten, CpuStorage};
use crate::strided::parallel;
use crate::vmath;

/// `(N, C, L)` of `x` `[N, C, ...]`.
fn dims(x: &Strided) -> (usize, usize, usize) {
    let s = x.layout.shape();
    (s[0], s[1], s[2..].iter().product())
}

/// Channel `ch`'s `N` rows of `v` (`[N, C, L]`), each contiguous.
fn channel<T: Elem>(v: &[T], (n, c, l): (usize, usize, usize), ch: usize) -> impl Iterator<Item = &[T]> + '_ {
    (0..n).map(move |i| &v[(i * c + ch) * l..][..l])
}

/// `sum(f(x))` over channel `ch` of `v`, in f64: the rows in lanes that vectorize (one f64
/// running sum, as before, cost 4 cycles an element in add latency alone).
fn channel_sum<T: Elem>(v: &[T], dims: (usize, usize, usize), ch: usize, f: impl Fn(f64) -> f64 + Copy) -> f64 {
    channel(v, dims, ch).map(|row| sum_by(row, |&e| f(Scalar::to_f64(e)))).sum()
}

/// Fills `out` (`[N, C, L]`) row by row with `f(channel, row_in, row_out)`, in parallel when large.
fn per_row<T: Elem>(out: &mut [T], c: usize, l: usize, f: impl Fn(usize, usize, &mut [T]) + Sync) {
    let l = l.max(1);
    if parallel(out.len()) {
        out.par_chunks_mut(l).enumerate().for_each(|(r, row)| f(r % c, r * l, row));
    } else {
        out.chunks_mut(l).enumerate().for_each(|(r, row)| f(r % c, r * l, row));
    }
}

/// `v` rounded to `T`.
fn put<T: Elem>(v: f64) -> T {
    <T as Scalar>::from_f64(v)
}

fn wrap<T: Elem>(v: Vec<T>) -> CpuStorage {
    T::wrap(v.into())
}

/// `BatchNormTrain`: x [, weight, bias][, running_mean, running_var[, num_batches_tracked]]
/// to y, mean, invstd [, running_mean', running_var'[, num_batches_tracked + 1]] (y through a
/// ReLU with `relu`); `x` and `y` of type `T`, the `[C]` operands of `P` (`T` itself, or f32
/// beside a half under autocast), the count I64.
pub(crate) fn batch_norm_train<T: Elem, P: Elem>(o: &BatchNormOptions, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let (inputs, counter) = if o.count { inputs.split_at(inputs.len() - 1) } else { (inputs, &[][..]) };
    let x = slices::<T>("batch_norm_train", &inputs[..1])?.remove(0);
    let p = slices::<P>("batch_norm_train", &inputs[1..])?;
    let counted = slices::<i64>("batch_norm_train", counter)?.iter().map(|n| CpuStorage::I64(vec![n[0] + 1].into())).collect::<Vec<_>>();
    let (n, c, l) = dims(&inputs[0]);
    let m = (n * l) as f64;
    let stats: Vec<(f64, f64)> = (0..c)
        .into_par_iter()
        .map(|ch| {
            let mean = channel_sum(&x, (n, c, l), ch, |e| e) / m;
            (mean, channel_sum(&x, (n, c, l), ch, |e| (e - mean) * (e - mean)) / m)
        })
        .collect();
    let invstd: Vec<f64> = stats.iter().map(|&(_, var)| 1.0 / (var + o.eps).sqrt()).collect();
    let param = |k: usize, ch: usize, default: f64| if o.affine { Scalar::to_f64(p[k][ch]) } else { default };
    let mut y = alloc_overwritten("batch_norm", x.len(), T::default())?;
    per_row(&mut y, c, l, |ch, at, row| {
        let (scale, shift, mean) = (invstd[ch] * param(0, ch, 1.0), param(1, ch, 0.0), stats[ch].0);
        let xs = &x[at..][..row.len()];
        for (out, &x) in row.iter_mut().zip(xs) {
            let v = (Scalar::to_f64(x) - mean) * scale + shift;
            *out = put::<T>(if o.relu { v.max(0.0) } else { v });
        }
    });
    let mut outs = vec![wrap(y), wrap(stats.iter().map(|s| put::<P>(s.0)).collect()), wrap(invstd.iter().map(|&s| put::<P>(s)).collect())];
    if o.running {
        let k = 2 * o.affine as usize;
        let blend = |old: &P, new: f64| put::<P>((1.0 - o.momentum) * Scalar::to_f64(*old) + o.momentum * new);
        outs.push(wrap(p[k].iter().zip(&stats).map(|(old, s)| blend(old, s.0)).collect()));
        outs.push(wrap(p[k + 1].iter().zip(&stats).map(|(old, s)| blend(old, s.1 * m / (m - 1.0))).collect()));
    }
    outs.extend(counted);
    Ok(outs)
}

/// `BatchNormBackward`: x, dy, mean, invstd [, weight [, bias with `relu`]] to dx [, dweight,
/// dbias]; `x`, `dy` and `dx` of type `T`, the `[C]` operands and outputs of `P`. With `relu`,
/// dy counts only where the forward's output, computed again from x, was positive.
pub(crate) fn batch_norm_backward<T: Elem, P: Elem>(o: &BatchNormOptions, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("batch_norm_backward", &inputs[..2])?;
    let p = slices::<P>("batch_norm_backward", &inputs[2..])?;
    let (n, c, l) = dims(&inputs[0]);
    let m = (n * l) as f64;
    let at = |k: usize, ch: usize| Scalar::to_f64(p[k][ch]);
    // The forward's affine map of xhat, for the ReLU's cut.
    let affine = |ch: usize| if o.affine && o.relu { (at(2, ch), at(3, ch)) } else { (1.0, 0.0) };
    // The f32 kernels' form of it: no ReLU is one whose input is always 1.
    let relu_cut = |ch: usize| if o.relu { affine(ch) } else { (0.0, 1.0) };
    // dy where the ReLU let the value through (all of it without one).
    let grad = |dy: T, xhat: f64, (w, b): (f64, f64)| if o.relu && xhat * w + b <= 0.0 { 0.0 } else { Scalar::to_f64(dy) };
    // (sum(dy), sum(dy xhat)) per channel: dbias and dweight.
    let sums: Vec<(f64, f64)> = (0..c)
        .into_par_iter()
        .map(|ch| {
            let (mean, invstd) = (at(0, ch), at(1, ch));
            if let (Some(x), Some(dy)) = (as_f32(&v[0]), as_f32(&v[1])) {
                let (w, b) = relu_cut(ch);
                let mut acc = [0.0; 2];
                let rows = channel(dy, (n, c, l), ch).zip(channel(x, (n, c, l), ch));
                rows.for_each(|(dy, x)| vmath::bn_grad_sums(dy, x, [mean, invstd, w, b], &mut acc));
                return (acc[0], acc[1] * invstd);
            }
            let rows = channel(&v[1], (n, c, l), ch).zip(channel(&v[0], (n, c, l), ch));
            if o.relu {
                let wb = affine(ch);
                let terms = |dy: T, x: T| {
                    let xhat = (Scalar::to_f64(x) - mean) * invstd;
                    let g = grad(dy, xhat, wb);
                    (g, g * xhat)
                };
                return rows.map(|(dy, x)| sum_pair_by2(dy, x, terms)).fold((0.0, 0.0), |(s, sx), (g, gx)| (s + g, sx + gx));
            }
            rows.fold((0.0, 0.0), |(s, sx), (dy, x)| {
                let (f, g) = (|&e: &T| Scalar::to_f64(e), |dy: T, x: T| Scalar::to_f64(dy) * (Scalar::to_f64(x) - mean));
                (s + sum_by(dy, f), sx + sum_by2(dy, x, g) * invstd)
            })
        })
        .collect();
    let mut dx = alloc_overwritten("batch_norm", v[0].len(), T::default())?;
    per_row(&mut dx, c, l, |ch, row_at, row| {
        let (mean, invstd, (dbias, dweight)) = (at(0, ch), at(1, ch), sums[ch]);
        let scale = invstd * if o.affine { at(2, ch) } else { 1.0 };
        let wb = affine(ch);
        // The row's inputs cut to its length first, so the loop indexes without bounds checks.
        let (x, dy) = (&v[0][row_at..][..row.len()], &v[1][row_at..][..row.len()]);
        if let (Some(x), Some(dy), Some(dx)) = (as_f32(x), as_f32(dy), as_f32_mut(row)) {
            let (w, b) = relu_cut(ch);
            return vmath::bn_grad_row(dy, x, dx, [mean, invstd, w, b], [scale, dbias / m, dweight / m]);
        }
        for ((out, &x), &dy) in row.iter_mut().zip(x).zip(dy) {
            let xhat = (Scalar::to_f64(x) - mean) * invstd;
            *out = put::<T>(scale * (grad(dy, xhat, wb) - dbias / m - xhat * dweight / m));
        }
    });
    let mut outs = vec![wrap(dx)];
    if o.affine {
        outs.push(wrap(sums.iter().map(|s| put::<P>(s.1)).collect()));
        outs.push(wrap(sums.iter().map(|s| put::<P>(s.0)).collect()));
    }
    Ok(outs)
}
