//! Sliding 2-D windows over `[N, C, H, W]`: im2col/col2im for convolution, max and average
//! pooling. Every kernel works one `[H, W]` plane at a time, in parallel over `N * C`.

use std::ops::Range;

use liandan_tensor::backend::Window2d;
use liandan_tensor::{Error, Layout, Result, Strided};
use num_traits::Zero;
use rayon::prelude::*;

use crate::reduce::gt;
use crate::scalar::{as_f32, as_f32_mut};
use crate::storage::{alloc, alloc_overwritten, bad_dtype, cpu, map_dtype, map_float, slice, CpuStorage, Real, Scalar};
use crate::strided::{parallel, with_contiguous};

/// Window geometry in plain numbers, checked so that no kernel can underflow or divide by zero.
#[derive(Clone, Copy)]
pub(crate) struct Geo {
    planes: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: isize,
    pw: isize,
    dh: usize,
    dw: usize,
    oh: usize,
    ow: usize,
}

impl Geo {
    pub(crate) fn new(op: &'static str, w: &Window2d) -> Result<Geo> {
        let (k, s, p, d) = (w.kernel, w.stride, w.padding, w.dilation);
        let fits = |size: usize, p: usize, d: usize, k: usize| size + 2 * p > d * (k - 1);
        if [k.0, k.1, s.0, s.1, d.0, d.1].contains(&0) || !fits(w.h, p.0, d.0, k.0) || !fits(w.w, p.1, d.1, k.1) {
            return Err(Error::BadShape { op, shape: vec![w.n, w.c, w.h, w.w], detail: format!("no window fits: {w:?}") });
        }
        Ok(Geo {
            planes: w.n * w.c,
            h: w.h,
            w: w.w,
            kh: k.0,
            kw: k.1,
            sh: s.0,
            sw: s.1,
            ph: p.0 as isize,
            pw: p.1 as isize,
            dh: d.0,
            dw: d.1,
            oh: w.out_h(),
            ow: w.out_w(),
        })
    }

    pub(crate) fn hw(&self) -> usize {
        self.h * self.w
    }

    /// Rows of the column matrix of one plane: the kernel's taps.
    pub(crate) fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// Whether the columns are the input itself (a 1x1 kernel, stride 1, no padding).
    pub(crate) fn is_identity(&self) -> bool {
        (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw) == (1, 1, 1, 1, 0, 0)
    }

    pub(crate) fn l(&self) -> usize {
        self.oh * self.ow
    }

    /// Whether each tap's columns are the plane shifted by one offset: stride 1, no dilation,
    /// and outputs as wide as the input (a 3x3 convolution padded by 1), so that column `q`
    /// of tap `(i, j)` reads element `q + off` of the plane wherever it reads the plane at all.
    fn is_shift(&self) -> bool {
        (self.sh, self.sw, self.dh, self.dw) == (1, 1, 1, 1) && self.ow == self.w
    }

    /// Tap `(i, j)` of an [`Geo::is_shift`] geometry.
    fn shift(&self, i: usize, j: usize) -> Shift {
        let (dy, dx) = (i as isize - self.ph, j as isize - self.pw);
        let (w, hw) = (self.w as isize, (self.h * self.w) as isize);
        let off = dy * w + dx;
        let rows = span(dy, 1, self.h, self.oh);
        let (lo, hi) = ((rows.start * self.w) as isize, (rows.end * self.w) as isize);
        let start = lo.max(-off).min(hi);
        let end = hi.min(hw - off).max(start);
        let wrapped = if dx < 0 { 0..(-dx).min(w) } else { w - dx.min(w)..w };
        Shift { off, run: start as usize..end as usize, rows, wrapped: wrapped.start as usize..wrapped.end as usize }
    }

    /// For [`col2im_plane`]: whether column `q` of a tap in kernel column `j` reads the plane,
    /// all ones if so and zero if not (element `j * L + q`), for an [`Geo::is_shift`]
    /// geometry; empty for any other.
    fn fold_masks(&self) -> Vec<u32> {
        if !self.is_shift() {
            return Vec::new();
        }
        let (w, l) = (self.w as isize, self.l());
        let reads = move |q: usize, j: usize| (0..w).contains(&((q % self.w) as isize + j as isize - self.pw));
        (0..self.kw).flat_map(|j| (0..l).map(move |q| if reads(q, j) { u32::MAX } else { 0 })).collect()
    }

    /// For im2col row `(i, j)`: the output rows and columns whose tap lands inside the input,
    /// and the input column the first of those columns reads.
    fn im2col_spans(&self, i: usize, j: usize) -> (Range<usize>, Range<usize>, usize) {
        let ys = span((i * self.dh) as isize - self.ph, self.sh, self.h, self.oh);
        let xs = span((j * self.dw) as isize - self.pw, self.sw, self.w, self.ow);
        // Clamped so an empty span still slices (to nothing).
        let iw0 = ((xs.start * self.sw + j * self.dw) as isize - self.pw).clamp(0, self.w as isize) as usize;
        (ys, xs, iw0)
    }

    /// The input row of tap `i` at output row `y` (inside the input when `y` is in the span).
    fn row_of(&self, y: usize, i: usize) -> usize {
        ((y * self.sh + i * self.dh) as isize - self.ph) as usize
    }

    /// PyTorch's average-pooling window of output `(y, x)`: the clipped input ranges and the
    /// divisor. The window is first clipped to the padded input, which is what
    /// `count_include_pad` counts, then to the real one.
    fn avg_window(&self, y: usize, x: usize, count_include_pad: bool) -> (Range<usize>, Range<usize>, usize) {
        let clip = |o: usize, s: usize, k: usize, p: isize, size: usize| {
            let start = (o * s) as isize - p;
            let end = (start + k as isize).min(size as isize + p);
            let padded = (end - start) as usize;
            let (start, end) = (start.max(0) as usize, end.min(size as isize).max(0) as usize);
            (start..end.max(start), padded)
        };
        let (rows, ph) = clip(y, self.sh, self.kh, self.ph, self.h);
        let (cols, pw) = clip(x, self.sw, self.kw, self.pw, self.w);
        let count = if count_include_pad { ph * pw } else { rows.len() * cols.len() };
        (rows, cols, count)
    }
}

/// One tap of a [`Geo::is_shift`] geometry: its row of columns is `plane[q + off]` over
/// `run`, the padding elsewhere, and the run's rows `rows` of `W` columns each read the
/// padding at their columns `wrapped` too (where the run wrapped onto a neighbouring row).
struct Shift {
    off: isize,
    run: Range<usize>,
    rows: Range<usize>,
    wrapped: Range<usize>,
}

impl Shift {
    /// The plane's elements the run reads (none for an empty run, whose start may lie
    /// before the plane's: a tap wholly in the padding).
    fn source(&self) -> Range<usize> {
        if self.run.is_empty() {
            return 0..0;
        }
        let at = (self.run.start as isize + self.off) as usize;
        at..at + self.run.len()
    }
}

/// The `t` in `0..count` for which `base + t * step` lies in `0..size`: the valid taps or
/// outputs along one axis, computed once so the inner loops need no bounds tests.
fn span(base: isize, step: usize, size: usize, count: usize) -> Range<usize> {
    let (step, size) = (step as isize, size as isize);
    let lo = if base >= 0 { 0 } else { (-base + step - 1) / step };
    let hi = if base >= size { 0 } else { (size - base + step - 1) / step };
    let hi = (hi as usize).min(count);
    (lo as usize).min(hi)..hi
}

/// The input positions, along one axis, of the kernel taps of a window starting at `start`
/// that land inside the input.
fn taps_along(start: isize, dilation: usize, size: usize, kernel: usize) -> std::iter::StepBy<Range<usize>> {
    let t = span(start, dilation, size, kernel);
    let first = (start + (t.start * dilation) as isize).max(0) as usize;
    (first..first + t.len() * dilation).step_by(dilation)
}

/// Splits `out` into per-plane chunks and runs `f(plane, chunk)` on each, in parallel when
/// `work` (elements touched) is large.
fn per_plane<O: Send>(out: &mut [O], chunk: usize, work: usize, f: impl Fn(usize, &mut [O]) + Sync) {
    if chunk == 0 {
        return;
    }
    if parallel(work) {
        out.par_chunks_mut(chunk).enumerate().for_each(|(p, c)| f(p, c));
    } else {
        out.chunks_mut(chunk).enumerate().for_each(|(p, c)| f(p, c));
    }
}

fn check_input<const R: usize>(op: &'static str, l: &Layout, shape: [usize; R]) -> Result<()> {
    if l.shape() != shape {
        return Err(Error::BadShape { op, shape: l.shape().to_vec(), detail: format!("the window describes {shape:?}") });
    }
    Ok(())
}

/// Average pooling has no dilation (the trait says so); refuse rather than quietly ignore it.
fn check_no_dilation(op: &'static str, w: &Window2d) -> Result<()> {
    if w.dilation != (1, 1) {
        return Err(Error::BadShape { op, shape: vec![w.n, w.c, w.h, w.w], detail: format!("dilation {:?} is not supported", w.dilation) });
    }
    Ok(())
}

pub(crate) fn im2col(x: &CpuStorage, l: &Layout, window: Window2d, pad_value: f64) -> Result<CpuStorage> {
    let g = Geo::new("im2col", &window)?;
    check_input("im2col", l, [window.n, window.c, g.h, g.w])?;
    if let CpuStorage::Bool(v) = x {
        return Ok(CpuStorage::Bool(with_contiguous(slice(v), l, |xs| im2col_t(xs, g, (pad_value != 0.0) as u8))??.into()));
    }
    Ok(map_dtype!(x, v => with_contiguous(v, l, |xs| im2col_t(xs, g, Scalar::from_f64(pad_value)))??))
}

fn im2col_t<T: Scalar>(xs: &[T], g: Geo, pad: T) -> Result<Vec<T>> {
    let (kk, l) = (g.kh * g.kw, g.l());
    // The largest buffer of a convolution, so the one most worth refusing with an error.
    let mut out = alloc_overwritten("im2col", g.planes * kk * l, pad)?;
    let work = out.len();
    per_plane(&mut out, kk * l, work, |p, block| im2col_plane(&xs[p * g.hw()..(p + 1) * g.hw()], &g, block, l, pad));
    Ok(out)
}

/// The `[kh * kw, L]` columns of one `[H, W]` plane into `block`, rows `ld` apart, `pad`
/// where a tap falls in the padding: every element of the rows is written.
fn im2col_plane<T: Copy>(plane: &[T], g: &Geo, block: &mut [T], ld: usize, pad: T) {
    if g.is_shift() {
        return im2col_plane_shift(plane, g, block, ld, pad);
    }
    for r in 0..g.taps() {
        let row = &mut block[r * ld..][..g.l()];
        let (i, j) = (r / g.kw, r % g.kw);
        let (ys, xs, iw0) = g.im2col_spans(i, j);
        row[..ys.start * g.ow].fill(pad);
        row[ys.end * g.ow..].fill(pad);
        for y in ys {
            let out = &mut row[y * g.ow..][..g.ow];
            out[..xs.start].fill(pad);
            out[xs.end..].fill(pad);
            let src = &plane[g.row_of(y, i) * g.w..][iw0..g.w];
            let dst = &mut out[xs.clone()];
            if g.sw == 1 {
                // The common case, a plain copy: `step_by` would hide that from the compiler.
                dst.copy_from_slice(&src[..dst.len()]);
            } else {
                dst.iter_mut().zip(src.iter().step_by(g.sw)).for_each(|(d, &s)| *d = s);
            }
        }
    }
}

/// [`im2col_plane`] for a [`Geo::is_shift`] geometry: each tap's row is one run of the
/// plane, then the padding columns the run wrapped onto. Small planes' rows are a few
/// elements long, too short to copy one at a time.
fn im2col_plane_shift<T: Copy>(plane: &[T], g: &Geo, block: &mut [T], ld: usize, pad: T) {
    for r in 0..g.taps() {
        let row = &mut block[r * ld..][..g.l()];
        let s = g.shift(r / g.kw, r % g.kw);
        row[..s.run.start].fill(pad);
        row[s.run.end..].fill(pad);
        row[s.run.clone()].copy_from_slice(&plane[s.source()]);
        for y in s.rows {
            row[y * g.w..][s.wrapped.clone()].fill(pad);
        }
    }
}

/// The `[planes * kh * kw, L]` columns of `g.planes` consecutive planes of `xs` into `out`
/// (zero in the padding), rows `ld` apart, on this thread: the convolution calls it once per
/// image, several images side by side in one buffer when `ld` is a multiple of `L`.
pub(crate) fn im2col_into<T: Real>(xs: &[T], g: &Geo, out: &mut [T], ld: usize) {
    let (rows, hw) = (g.taps(), g.hw());
    for p in 0..g.planes {
        im2col_plane(&xs[p * hw..(p + 1) * hw], g, &mut out[p * rows * ld..], ld, T::zero());
    }
}

/// The columns of `nb` whole images side by side, as [`im2col_into`] once per image (image
/// `i`'s planes start at `plane_at(i)` in `xs`, its columns at column `i * L` of `out`, rows
/// `nb * L` apart), on every thread: each takes a share of the planes, whose rows are
/// contiguous in `out`. For the convolution's single block of small images, whose columns
/// are runs of a few elements each (too slow to build on one thread while the product runs on all).
pub(crate) fn im2col_images<T: Real>(xs: &[T], plane_at: impl Fn(usize) -> usize + Sync, nb: usize, g: &Geo, out: &mut [T]) {
    let (rows, l) = (g.taps(), g.l());
    let ld = nb * l;
    out[..g.planes * rows * ld].par_chunks_mut(rows * ld).enumerate().for_each(|(p, block)| {
        for i in 0..nb {
            let at = plane_at(i) + p * g.hw();
            im2col_plane(&xs[at..at + g.hw()], g, &mut block[i * l..], ld, T::zero());
        }
    });
}

/// The adjoint of [`im2col_images`]: adds the columns of `nb` images side by side in `cols`,
/// folded back, to the planes of those whole images in `dx` (`image` elements an image, of
/// which `g.planes` planes from plane `plane0` on are this group's), on every thread: each
/// takes a share of the (image, plane) pairs.
pub(crate) fn col2im_images<T: Real<Acc = T>>(cols: &[T], nb: usize, g: &Geo, dx: &mut [T], image: usize, plane0: usize) {
    let (rows, hw, l) = (g.taps(), g.hw(), g.l());
    let (ld, per_image) = (nb * l, image / hw);
    let masks = g.fold_masks();
    dx[..nb * image].par_chunks_mut(hw).enumerate().for_each(|(q, plane)| {
        let (i, p) = (q / per_image, q % per_image);
        if (plane0..plane0 + g.planes).contains(&p) {
            col2im_plane(&cols[(p - plane0) * rows * ld + i * l..], g, plane, ld, &masks);
        }
    });
}

/// Adds the `[planes * kh * kw, L]` columns `cols` (rows `ld` apart), folded back, to the
/// planes of `dx` (`g.planes` of them, or as many as `dx` holds; the adjoint of
/// [`im2col_into`]), on this thread.
pub(crate) fn col2im_add<T: Real<Acc = T>>(cols: &[T], g: &Geo, dx: &mut [T], ld: usize) {
    let (rows, hw) = (g.taps(), g.hw());
    let masks = g.fold_masks();
    for (p, plane) in dx.chunks_mut(hw).take(g.planes).enumerate() {
        col2im_plane(&cols[p * rows * ld..], g, plane, ld, &masks);
    }
}

/// Adds one plane's `[kh * kw, L]` columns (rows `ld` apart), folded back, to `acc` (`[H, W]`);
/// `masks` are the geometry's [`Geo::fold_masks`].
fn col2im_plane<T: Real>(block: &[T], g: &Geo, acc: &mut [T::Acc], ld: usize, masks: &[u32]) {
    if g.is_shift() {
        return col2im_plane_shift(block, g, acc, ld, masks);
    }
    for r in 0..g.taps() {
        let row = &block[r * ld..][..g.l()];
        let (i, j) = (r / g.kw, r % g.kw);
        let (ys, xs, iw0) = g.im2col_spans(i, j);
        for y in ys {
            let dst = &mut acc[g.row_of(y, i) * g.w..][iw0..g.w];
            let src = &row[y * g.ow..][xs.clone()];
            if g.sw == 1 {
                dst[..src.len()].iter_mut().zip(src).for_each(|(d, &s)| *d += s.widen());
            } else {
                dst.iter_mut().step_by(g.sw).zip(src).for_each(|(d, &s)| *d += s.widen());
            }
        }
    }
}

/// [`col2im_plane`] for a [`Geo::is_shift`] geometry: each tap's row added as one run, its
/// columns that wrapped onto a neighbouring row masked out (adding zero), so that the adds
/// stay in vector lanes however narrow the plane; f32 in the CPU's widest ones.
fn col2im_plane_shift<T: Real>(block: &[T], g: &Geo, acc: &mut [T::Acc], ld: usize, masks: &[u32]) {
    for r in 0..g.taps() {
        let (i, j) = (r / g.kw, r % g.kw);
        let s = g.shift(i, j);
        let src = &block[r * ld..][s.run.clone()];
        let dst = &mut acc[s.source()];
        let keep = (!s.wrapped.is_empty()).then(|| &masks[j * g.l()..][s.run.clone()]);
        if let (Some(src), Some(dst)) = (as_f32(src), as_f32_mut(dst)) {
            match keep {
                None => crate::vmath::add_in_place(dst, src),
                Some(keep) => crate::vmath::add_kept(dst, src, keep),
            }
            continue;
        }
        match keep {
            None => dst.iter_mut().zip(src).for_each(|(d, &v)| *d += v.widen()),
            Some(keep) => dst.iter_mut().zip(src).zip(keep).for_each(|((d, &v), &k)| *d += if k != 0 { v.widen() } else { T::Acc::zero() }),
        }
    }
}

pub(crate) fn col2im(cols: &CpuStorage, l: &Layout, window: Window2d) -> Result<CpuStorage> {
    let g = Geo::new("col2im", &window)?;
    check_input("col2im", l, [window.n, window.c * g.kh * g.kw, g.l()])?;
    Ok(map_float!(cols, "col2im", v => with_contiguous(v, l, |xs| col2im_t(xs, g))??))
}

fn col2im_t<T: Real>(xs: &[T], g: Geo) -> Result<Vec<T>> {
    let (kk, l) = (g.kh * g.kw, g.l());
    let mut out = alloc("col2im", g.planes * g.hw(), T::zero())?;
    let masks = g.fold_masks();
    per_plane(&mut out, g.hw(), xs.len(), |p, plane| {
        let mut acc = vec![T::Acc::zero(); g.hw()];
        col2im_plane(&xs[p * kk * l..(p + 1) * kk * l], &g, &mut acc, l, &masks);
        plane.iter_mut().zip(acc).for_each(|(o, a)| *o = T::narrow(a));
    });
    Ok(out)
}

pub(crate) fn max_pool2d(x: &CpuStorage, l: &Layout, window: Window2d) -> Result<(CpuStorage, CpuStorage)> {
    let g = Geo::new("max_pool2d", &window)?;
    check_input("max_pool2d", l, [window.n, window.c, g.h, g.w])?;
    let indices: Vec<i64>;
    let values = map_dtype!(x, v => {
        let (vals, idx) = with_contiguous(v, l, |xs| max_pool_t(xs, g))??;
        indices = idx;
        vals
    });
    Ok((values, CpuStorage::I64(indices.into())))
}

/// A window that lies wholly in the padding (possible only with odd geometry) yields the
/// lowest value and index -1. The values and indices are written straight into their two
/// buffers, planes in parallel; windows without padding or dilation read their rows as slices.
fn max_pool_t<T: Scalar>(xs: &[T], g: Geo) -> Result<(Vec<T>, Vec<i64>)> {
    let (l, hw) = (g.l(), g.hw());
    let mut values = alloc_overwritten("max_pool2d", g.planes * l, T::default())?;
    let mut indices = alloc_overwritten("max_pool2d", g.planes * l, 0i64)?;
    // The taps inside the input, per output row and column: the same for every plane, and
    // their divisions cost more than the comparisons.
    let row_taps: Vec<_> = (0..g.oh).map(|y| taps_along((y * g.sh) as isize - g.ph, g.dh, g.h, g.kh)).collect();
    let col_taps: Vec<_> = (0..g.ow).map(|x| taps_along((x * g.sw) as isize - g.pw, g.dw, g.w, g.kw)).collect();
    let plain = g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1;
    let plane_of = |p: usize, vals: &mut [T], idx: &mut [i64]| {
        let plane = &xs[p * hw..(p + 1) * hw];
        let outs = vals.iter_mut().zip(idx.iter_mut());
        if plain && g.kh == 2 && g.kw == 2 {
            // The usual 2 x 2 window, its four taps unrolled (in the loop below, two rows of
            // two-element slices cost more than the comparisons).
            for (y, (vals, idx)) in vals.chunks_mut(g.ow).zip(idx.chunks_mut(g.ow)).enumerate() {
                let top = y * g.sh * g.w;
                let (r0, r1) = (&plane[top..top + g.w], &plane[top + g.w..top + 2 * g.w]);
                for (x, (v, i)) in vals.iter_mut().zip(idx.iter_mut()).enumerate() {
                    let c = x * g.sw;
                    let (mut best, mut at) = (r0[c], c);
                    for (value, tap) in [(r0[c + 1], c + 1), (r1[c], g.w + c), (r1[c + 1], g.w + c + 1)] {
                        if gt(value, best) {
                            (best, at) = (value, tap);
                        }
                    }
                    (*v, *i) = (best, (top + at) as i64);
                }
            }
            return;
        }
        if plain {
            // Every window lies inside the input: its first tap starts the search.
            let windows = (0..g.oh).flat_map(|y| (0..g.ow).map(move |x| (y * g.sh, x * g.sw)));
            for ((v, i), (y0, x0)) in outs.zip(windows) {
                let (mut best, mut at) = (plane[y0 * g.w + x0], y0 * g.w + x0);
                for ih in y0..y0 + g.kh {
                    let start = ih * g.w + x0;
                    for (j, &x) in plane[start..start + g.kw].iter().enumerate() {
                        if gt(x, best) {
                            (best, at) = (x, start + j);
                        }
                    }
                }
                (*v, *i) = (best, at as i64);
            }
            return;
        }
        let windows = row_taps.iter().flat_map(|hs| col_taps.iter().map(move |cols| (hs, cols)));
        for ((v, i), (hs, cols)) in outs.zip(windows) {
            let mut best = (T::from_f64(f64::NEG_INFINITY), -1i64);
            for ih in hs.clone() {
                let row = &plane[ih * g.w..(ih + 1) * g.w];
                for iw in cols.clone() {
                    if best.1 < 0 || gt(row[iw], best.0) {
                        best = (row[iw], (ih * g.w + iw) as i64);
                    }
                }
            }
            (*v, *i) = best;
        }
    };
    if l > 0 && parallel(g.planes * l * g.kh * g.kw) {
        values.par_chunks_mut(l).zip(indices.par_chunks_mut(l)).enumerate().for_each(|(p, (v, i))| plane_of(p, v, i));
    } else if l > 0 {
        values.chunks_mut(l).zip(indices.chunks_mut(l)).enumerate().for_each(|(p, (v, i))| plane_of(p, v, i));
    }
    Ok((values, indices))
}

/// `ops::MaxPool2dBackward`: dy `[N, C, out_h, out_w]` added into zeros at the forward's
/// indices, a plane at a time with planes in parallel (the composite's scatter-add is one
/// sequential pass), in dy's type as the scatter adds; an index of -1 (a window wholly in the
/// padding) adds nothing, any other outside its plane is an error.
pub(crate) fn max_pool2d_backward(window: &Window2d, inputs: &[Strided]) -> Result<CpuStorage> {
    let [dy, indices] = inputs else {
        return Err(Error::BadShape { op: "max_pool2d_backward", shape: vec![inputs.len()], detail: "takes dy and the indices".into() });
    };
    let g = Geo::new("max_pool2d_backward", window)?;
    let out = [window.n, window.c, g.oh, g.ow];
    check_input("max_pool2d_backward", dy.layout, out)?;
    check_input("max_pool2d_backward", indices.layout, out)?;
    let CpuStorage::I64(idx) = cpu(indices.storage) else {
        return Err(bad_dtype("max_pool2d_backward", indices.dtype, "the indices are i64"));
    };
    with_contiguous(slice(idx), indices.layout, |idx| {
        Ok(map_float!(cpu(dy.storage), "max_pool2d_backward", v => with_contiguous(v, dy.layout, |dys| max_pool_backward_t(dys, idx, g))??))
    })?
}

fn max_pool_backward_t<T: Real>(dys: &[T], idx: &[i64], g: Geo) -> Result<Vec<T>> {
    let (l, hw) = (g.l(), g.hw());
    let mut dx = alloc_overwritten("max_pool2d_backward", g.planes * hw, T::zero())?;
    let bad = std::sync::atomic::AtomicI64::new(-1);
    per_plane(&mut dx, hw, g.planes * (hw + l), |p, plane| {
        plane.fill(T::zero());
        for (&d, &i) in dys[p * l..(p + 1) * l].iter().zip(&idx[p * l..(p + 1) * l]) {
            match usize::try_from(i) {
                Ok(at) if at < hw => plane[at] = plane[at] + d,
                _ if i == -1 => {}
                _ => bad.store(i, std::sync::atomic::Ordering::Relaxed),
            }
        }
    });
    match bad.into_inner() {
        -1 => Ok(dx),
        index => Err(Error::IndexOutOfRange { op: "max_pool2d_backward", index, size: hw }),
    }
}

pub(crate) fn avg_pool2d(x: &CpuStorage, l: &Layout, window: Window2d, count_include_pad: bool) -> Result<CpuStorage> {
    let g = Geo::new("avg_pool2d", &window)?;
    check_no_dilation("avg_pool2d", &window)?;
    check_input("avg_pool2d", l, [window.n, window.c, g.h, g.w])?;
    Ok(map_float!(x, "avg_pool2d", v => with_contiguous(v, l, |xs| avg_pool_t(xs, g, count_include_pad))??))
}

fn avg_pool_t<T: Real>(xs: &[T], g: Geo, count_include_pad: bool) -> Result<Vec<T>> {
    let mut out = alloc("avg_pool2d", g.planes * g.l(), T::zero())?;
    let work = out.len() * g.kh * g.kw;
    per_plane(&mut out, g.l(), work, |p, dst| {
        let plane = &xs[p * g.hw()..(p + 1) * g.hw()];
        for (o, d) in dst.iter_mut().enumerate() {
            let (rows, cols, count) = g.avg_window(o / g.ow, o % g.ow, count_include_pad);
            let mut sum = T::Acc::zero();
            for ih in rows {
                plane[ih * g.w + cols.start..ih * g.w + cols.end].iter().for_each(|&v| sum += v.widen());
            }
            *d = if count == 0 { T::zero() } else { T::narrow(sum / T::Acc::from_i64(count as i64)) };
        }
    });
    Ok(out)
}

pub(crate) fn avg_pool2d_backward(dy: &CpuStorage, l: &Layout, window: Window2d, count_include_pad: bool) -> Result<CpuStorage> {
    let g = Geo::new("avg_pool2d_backward", &window)?;
    check_no_dilation("avg_pool2d_backward", &window)?;
    check_input("avg_pool2d_backward", l, [window.n, window.c, g.oh, g.ow])?;
    Ok(map_float!(dy, "avg_pool2d_backward", v => with_contiguous(v, l, |dys| avg_pool_backward_t(dys, g, count_include_pad))??))
}

fn avg_pool_backward_t<T: Real>(dys: &[T], g: Geo, count_include_pad: bool) -> Result<Vec<T>> {
    let mut dx = alloc("avg_pool2d_backward", g.planes * g.hw(), T::zero())?;
    per_plane(&mut dx, g.hw(), dys.len() * g.kh * g.kw, |p, plane| {
        let dy = &dys[p * g.l()..(p + 1) * g.l()];
        let mut acc = vec![T::Acc::zero(); g.hw()];
        for (o, &d) in dy.iter().enumerate() {
            let (rows, cols, count) = g.avg_window(o / g.ow, o % g.ow, count_include_pad);
            if count == 0 {
                continue;
            }
            let share = d.widen() / T::Acc::from_i64(count as i64);
            for ih in rows {
                acc[ih * g.w + cols.start..ih * g.w + cols.end].iter_mut().for_each(|a| *a += share);
            }
        }
        plane.iter_mut().zip(acc).for_each(|(o, a)| *o = T::narrow(a));
    });
    Ok(dx)
}
