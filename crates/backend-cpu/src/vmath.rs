//! `exp` and `erf` for f32 written as straight-line arithmetic, and the fused kernels' slice
//! loops over them, compiled for the widest vector unit the CPU has (checked at run time: the
//! x86-64 baseline is SSE2, four lanes). `libm`'s calls kept the fused softmax and GELU at
//! 20-30 ns an element, and a per-element call across codegen units (no `#[inline]`) at 13.
//! Used by those fused kernels and by the `log` primitive on dense data (f16 and bf16 widened
//! to f32; within 2 ulp of libm, exact at 0, 1, infinity and NaN); `exp` and `erf` stay on
//! `libm`, and the conformance suite holds the fused kernels to the primitives' composite.

/// Defines `pub(crate) fn $name(args)` running `$body` built three times, for AVX-512, for
/// AVX2 and for the baseline, and picking one by what the CPU reports. The body must call only
/// `#[inline(always)]` functions, so that all of it is compiled with the wider instructions:
/// plain indexed loops, since an iterator adapter's `fold` (a nested `zip`) stayed a call into
/// one baseline copy shared by all three.
macro_rules! simd_fn {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        pub(crate) fn $name($($arg: $ty),*) {
            #[inline(always)]
            #[allow(clippy::needless_range_loop)]
            fn portable($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) {
                    portable($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) {
                    portable($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F, checked just above.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            portable($($arg),*)
        }
    };
}

const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// `1 / sqrt(2 pi)`, the standard normal density at 0.
const NORMAL_PDF_0: f32 = 0.398_942_3;

/// `Phi(x)`, the standard normal CDF, and `phi(x)`, its density, as the composite writes them.
#[inline(always)]
fn normal(x: f32) -> (f32, f32) {
    (0.5 * (1.0 + erf_f32(x * FRAC_1_SQRT_2)), exp_f32(-0.5 * x * x) * NORMAL_PDF_0)
}

simd_fn! {
    /// GELU forward, `y = x Phi(x)`, over matching slices.
    fn gelu_forward(x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &mut y[..n]);
        for i in 0..n {
            y[i] = x[i] * normal(x[i]).0;
        }
    }
}

simd_fn! {
    /// GELU backward, `dx = dy (Phi(x) + x phi(x))`, over matching slices.
    fn gelu_backward(x: &[f32], dy: &[f32], dx: &mut [f32]) {
        let n = x.len().min(dy.len()).min(dx.len());
        let (x, dy, dx) = (&x[..n], &dy[..n], &mut dx[..n]);
        for i in 0..n {
            let (cdf, pdf) = normal(x[i]);
            dx[i] = dy[i] * (cdf + x[i] * pdf);
        }
    }
}

simd_fn! {
    /// `y += b` elementwise over matching slices (a bias added to one row of a product).
    fn add_in_place(y: &mut [f32], b: &[f32]) {
        let n = y.len().min(b.len());
        let (y, b) = (&mut y[..n], &b[..n]);
        for i in 0..n {
            y[i] += b[i];
        }
    }
}

/// f64 lanes a batch-norm gradient's channel sums run in: two AVX-512 registers a sum.
const BN_LANES: usize = 16;

/// A batch-norm gradient's `g`: `dy`, or 0 where the forward's output `xhat w + b` (its ReLU's
/// input) was not positive. Without a ReLU, `w = 0` and `b = 1` keep every `dy` (a NaN `xhat`
/// too); that one loop vectorized, where LLVM left a copy without the cut in two-lane pieces.
#[inline(always)]
fn bn_g(dy: f32, xhat: f64, w: f64, b: f64) -> f64 {
    if xhat * w + b <= 0.0 {
        0.0
    } else {
        dy as f64
    }
}

simd_fn! {
    /// A batch-norm gradient's two channel sums over one row of `dy` and `x`, added to `acc`
    /// in f64: `sum g` and `sum g (x - mean)`, `g` as [`bn_g`] takes it (`channel = [mean,
    /// invstd, w, b]`).
    fn bn_grad_sums(dy: &[f32], x: &[f32], channel: [f64; 4], acc: &mut [f64; 2]) {
        let [mean, invstd, w, b] = channel;
        let n = dy.len().min(x.len());
        let (dy, x) = (&dy[..n], &x[..n]);
        let (mut s, mut sx) = ([0.0f64; BN_LANES], [0.0f64; BN_LANES]);
        let whole = n / BN_LANES * BN_LANES;
        for i in (0..whole).step_by(BN_LANES) {
            // Sliced to the lanes' length, so that the lanes' loop has no bounds checks.
            let (dy, x) = (&dy[i..i + BN_LANES], &x[i..i + BN_LANES]);
            for k in 0..BN_LANES {
                let d = x[k] as f64 - mean;
                let g = bn_g(dy[k], d * invstd, w, b);
                s[k] += g;
                sx[k] += g * d;
            }
        }
        for i in whole..n {
            let d = x[i] as f64 - mean;
            let g = bn_g(dy[i], d * invstd, w, b);
            s[0] += g;
            sx[0] += g * d;
        }
        for k in 0..BN_LANES {
            acc[0] += s[k];
            acc[1] += sx[k];
        }
    }
}

simd_fn! {
    /// A batch-norm gradient's `dx` over one row: `scale (g - dbias / M - xhat dweight / M)`
    /// with `xhat = (x - mean) invstd` and `g` as in [`bn_grad_sums`] (`channel` as there, `k =
    /// [scale, dbias / M, dweight / M]`).
    fn bn_grad_row(dy: &[f32], x: &[f32], dx: &mut [f32], channel: [f64; 4], k: [f64; 3]) {
        let ([mean, invstd, w, b], [scale, k0, k1]) = (channel, k);
        let n = dy.len().min(x.len()).min(dx.len());
        let (dy, x, dx) = (&dy[..n], &x[..n], &mut dx[..n]);
        for i in 0..n {
            let xhat = (x[i] as f64 - mean) * invstd;
            dx[i] = (scale * (bn_g(dy[i], xhat, w, b) - k0 - xhat * k1)) as f32;
        }
    }
}

simd_fn! {
    /// `y += x` elementwise where `keep` is all ones and `y += 0` where it is zero, over
    /// matching slices (a convolution tap's columns folded back, less those that wrapped).
    fn add_kept(y: &mut [f32], x: &[f32], keep: &[u32]) {
        let n = y.len().min(x.len()).min(keep.len());
        let (y, x, keep) = (&mut y[..n], &x[..n], &keep[..n]);
        for i in 0..n {
            y[i] += f32::from_bits(x[i].to_bits() & keep[i]);
        }
    }
}

/// An f32's exponent bits. `(bits & EXPONENT) + EXPONENT_LSB` carries into the sign bit
/// exactly when the exponent is all ones: an infinity or NaN.
const EXPONENT: u32 = 0x7f80_0000;
const EXPONENT_LSB: u32 = 0x0080_0000;

/// The sign bit set where `x` is an infinity or NaN, clear otherwise (ORed over a slice, it
/// tells whether any element is).
#[inline(always)]
pub(crate) fn non_finite_bit(x: f32) -> u32 {
    (x.to_bits() & EXPONENT).wrapping_add(EXPONENT_LSB) & 0x8000_0000
}

simd_fn! {
    /// `even[k] = x[2k]`, `odd[k] = x[2k + 1]` for `k < n`; `non_finite` gets the sign bit
    /// where any of those elements is an infinity or NaN ([`non_finite_bit`]).
    fn deinterleave(x: &[f32], even: &mut [f32], odd: &mut [f32], n: usize, non_finite: &mut u32) {
        let (x, even, odd) = (&x[..2 * n], &mut even[..n], &mut odd[..n]);
        let mut flags = 0;
        for k in 0..n {
            let (a, b) = (x[2 * k], x[2 * k + 1]);
            even[k] = a;
            odd[k] = b;
            flags |= non_finite_bit(a) | non_finite_bit(b);
        }
        *non_finite |= flags;
    }
}

/// Tiles a Winograd transform takes at a time, one lane each: an AVX-512 register of f32.
/// A loop of exactly this many steps is one vector instruction a step; a loop over a tile
/// row's own count vectorized only past it (and resnet18's rows have 4 to 16 tiles).
const TILE_LANES: usize = 16;

/// `B^T d B` of one 4x4 patch given as its four columns (rows 0 to 3 each), as 16 values
/// (position `4 i + j`).
#[inline(always)]
fn winograd_input_tile(column: impl Fn(usize) -> [f32; 4]) -> [f32; 16] {
    // t = B^T d down each column.
    let t = |j: usize| {
        let [d0, d1, d2, d3] = column(j);
        [d0 - d2, d1 + d2, d2 - d1, d1 - d3]
    };
    let (c0, c1, c2, c3) = (t(0), t(1), t(2), t(3));
    // v = t B along each row i of t.
    std::array::from_fn(|x| {
        let i = x / 4;
        match x % 4 {
            0 => c0[i] - c2[i],
            1 => c1[i] + c2[i],
            2 => c2[i] - c1[i],
            _ => c1[i] - c3[i],
        }
    })
}

/// `A^T m A` of one tile's 16 positions `m(x)`: its 2x2 outputs, top row then bottom.
#[inline(always)]
fn winograd_output_tile(m: impl Fn(usize) -> f32) -> [[f32; 2]; 2] {
    // a = A^T m down each column j, then y = a A along each row of a.
    let a = |j: usize| {
        let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
        [m0 + m1 + m2, m1 - m2 - m3]
    };
    let (a0, a1, a2, a3) = (a(0), a(1), a(2), a(3));
    std::array::from_fn(|r| [a0[r] + a1[r] + a2[r], a1[r] - a2[r] - a3[r]])
}

simd_fn! {
    /// Winograd F(2x2, 3x3)'s input transform `B^T d B` of `n` tiles side by side. Tile `k`'s
    /// 4x4 patch `d` has row `r` as `even[r][k], odd[r][k], even[r][k + 1], odd[r][k + 1]`
    /// (a padded plane's columns split by parity, so every load is contiguous); position
    /// `x = 4 i + j` of its transform goes to `v[x * stride + k]`.
    fn winograd_input_tiles(even: [&[f32]; 4], odd: [&[f32]; 4], v: &mut [f32], stride: usize, n: usize) {
        const L: usize = TILE_LANES;
        let (e, o) = (even.map(|r| &r[..n + 1]), odd.map(|r| &r[..n + 1]));
        let mut rows = v.chunks_mut(stride);
        let mut out: [&mut [f32]; 16] = std::array::from_fn(|_| &mut rows.next().expect("16 rows of tiles")[..n]);
        let column = |k: usize, j: usize| -> [f32; 4] {
            let at = k + j / 2;
            std::array::from_fn(|r| if j.is_multiple_of(2) { e[r][at] } else { o[r][at] })
        };
        let whole = n / L * L;
        for k0 in (0..whole).step_by(L) {
            // Lane l is tile k0 + l.
            let ec: [&[f32; L + 1]; 4] = std::array::from_fn(|r| e[r][k0..k0 + L + 1].try_into().expect("L + 1 lanes"));
            let oc: [&[f32; L + 1]; 4] = std::array::from_fn(|r| o[r][k0..k0 + L + 1].try_into().expect("L + 1 lanes"));
            let mut lanes = out.iter_mut();
            let vc: [&mut [f32; L]; 16] = std::array::from_fn(|_| (&mut lanes.next().expect("16 rows")[k0..k0 + L]).try_into().expect("L lanes"));
            for l in 0..L {
                let t = winograd_input_tile(|j| std::array::from_fn(|r| if j.is_multiple_of(2) { ec[r][l + j / 2] } else { oc[r][l + j / 2] }));
                for x in 0..16 {
                    vc[x][l] = t[x];
                }
            }
        }
        for k in whole..n {
            let t = winograd_input_tile(|j| column(k, j));
            for x in 0..16 {
                out[x][k] = t[x];
            }
        }
    }
}

simd_fn! {
    /// Winograd F(2x2, 3x3)'s output transform `A^T m A` of `n` tiles side by side: position
    /// `x = 4 i + j` of tile `k` at `m[x * stride + k]`; the tile's 2x2 outputs go to
    /// `top[2k..2k + 2]` and `bottom[2k..2k + 2]`.
    fn winograd_output_tiles(m: &[f32], stride: usize, n: usize, top: &mut [f32], bottom: &mut [f32]) {
        const L: usize = TILE_LANES;
        let rows: [&[f32]; 16] = std::array::from_fn(|x| &m[x * stride..][..n]);
        let (top, bottom) = (&mut top[..2 * n], &mut bottom[..2 * n]);
        let whole = n / L * L;
        for k0 in (0..whole).step_by(L) {
            // Lane l is tile k0 + l.
            let mc: [&[f32; L]; 16] = std::array::from_fn(|x| rows[x][k0..k0 + L].try_into().expect("L lanes"));
            let y0: &mut [f32; 2 * L] = (&mut top[2 * k0..2 * k0 + 2 * L]).try_into().expect("2 L lanes");
            let y1: &mut [f32; 2 * L] = (&mut bottom[2 * k0..2 * k0 + 2 * L]).try_into().expect("2 L lanes");
            for l in 0..L {
                let [t, b] = winograd_output_tile(|x| mc[x][l]);
                y0[2 * l..2 * l + 2].copy_from_slice(&t);
                y1[2 * l..2 * l + 2].copy_from_slice(&b);
            }
        }
        for k in whole..n {
            let [t, b] = winograd_output_tile(|x| rows[x][k]);
            top[2 * k..2 * k + 2].copy_from_slice(&t);
            bottom[2 * k..2 * k + 2].copy_from_slice(&b);
        }
    }
}

simd_fn! {
    /// `acc[i] += x[j * stride + i]` in f64 for every row `j < rows`, in row order: a block
    /// of a column sum's lanes. Four rows a pass, so `acc` is loaded and stored once for them.
    fn add_rows_f64(acc: &mut [f64], x: &[f32], rows: usize, stride: usize) {
        let n = acc.len();
        if rows == 0 || n == 0 {
            return;
        }
        assert!((rows - 1) * stride + n <= x.len(), "add_rows_f64: the rows reach past the slice");
        let mut j = 0;
        while j + 4 <= rows {
            let (r0, r1) = (&x[j * stride..][..n], &x[(j + 1) * stride..][..n]);
            let (r2, r3) = (&x[(j + 2) * stride..][..n], &x[(j + 3) * stride..][..n]);
            for i in 0..n {
                acc[i] = acc[i] + r0[i] as f64 + r1[i] as f64 + r2[i] as f64 + r3[i] as f64;
            }
            j += 4;
        }
        while j < rows {
            let r = &x[j * stride..][..n];
            for i in 0..n {
                acc[i] += r[i] as f64;
            }
            j += 1;
        }
    }
}

simd_fn! {
    /// `e = exp(e - shift)` in place (a softmax row's exponentials).
    fn exp_shifted(e: &mut [f32], shift: f32) {
        for e in e.iter_mut() {
            *e = exp_f32(*e - shift);
        }
    }
}

/// `1 / (1 + e^-x)`; 0 and 1 in the tails (within 1e-38 of the true value).
#[inline(always)]
fn sigmoid_f32(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-x))
}

/// `tanh(x)` within 1e-6 relative: `(1 - e) / (1 + e)` with `e = e^-2|x|`, and near 0, where
/// `1 - e` cancels, its Taylor series (the next term is under 3e-10 relative there).
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let e = exp_f32(-2.0 * a);
    let far = (1.0 - e) / (1.0 + e);
    let a2 = a * a;
    let near = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))));
    (if a < 0.125 { near } else { far }).copysign(x)
}

simd_fn! {
    /// The LSTM cell on one row: gates `[4, H]` (i, f, g, o) and c `[H]` to h' and c'.
    fn lstm_cell_row(gates: &[f32], c: &[f32], h_out: &mut [f32], c_out: &mut [f32]) {
        let h = c.len().min(h_out.len()).min(c_out.len()).min(gates.len() / 4);
        let (c, h_out, c_out) = (&c[..h], &mut h_out[..h], &mut c_out[..h]);
        let (gi, gf, gg, go) = (&gates[..h], &gates[h..2 * h], &gates[2 * h..3 * h], &gates[3 * h..4 * h]);
        for j in 0..h {
            let c_new = sigmoid_f32(gf[j]) * c[j] + sigmoid_f32(gi[j]) * tanh_f32(gg[j]);
            h_out[j] = sigmoid_f32(go[j]) * tanh_f32(c_new);
            c_out[j] = c_new;
        }
    }
}

simd_fn! {
    /// The LSTM cell's gradient on one row: gates `[4, H]`, c, c' and the gradients of h' and
    /// c' to dgates `[4, H]` and dc.
    fn lstm_cell_backward_row(gates: &[f32], c: &[f32], c_new: &[f32], dh: &[f32], dc_new: &[f32], dgates: &mut [f32], dc: &mut [f32]) {
        let h = c.len().min(c_new.len()).min(dh.len()).min(dc_new.len()).min(dc.len()).min(gates.len() / 4).min(dgates.len() / 4);
        let (c, c_new, dh, dc_new, dc) = (&c[..h], &c_new[..h], &dh[..h], &dc_new[..h], &mut dc[..h]);
        let (gi, gf, gg, go) = (&gates[..h], &gates[h..2 * h], &gates[2 * h..3 * h], &gates[3 * h..4 * h]);
        let (di, rest) = dgates.split_at_mut(h);
        let (df, rest) = rest.split_at_mut(h);
        let (dg, do_) = rest.split_at_mut(h);
        let (df, dg, do_) = (&mut df[..h], &mut dg[..h], &mut do_[..h]);
        for j in 0..h {
            let (i, f, g, o) = (sigmoid_f32(gi[j]), sigmoid_f32(gf[j]), tanh_f32(gg[j]), sigmoid_f32(go[j]));
            let tanh_c = tanh_f32(c_new[j]);
            // c' reaches the loss directly and through h' = o * tanh(c').
            let dc_total = dc_new[j] + dh[j] * o * (1.0 - tanh_c * tanh_c);
            di[j] = dc_total * g * i * (1.0 - i);
            df[j] = dc_total * c[j] * f * (1.0 - f);
            dg[j] = dc_total * i * (1.0 - g * g);
            do_[j] = dh[j] * tanh_c * o * (1.0 - o);
            dc[j] = dc_total * f;
        }
    }
}

simd_fn! {
    /// [`lstm_cell_row`] of the gates `x + gates` that leaves them activated in `gates` (i, f,
    /// g, o after σ, σ, tanh, σ), for a backward that reads them rather than recomputing them.
    fn lstm_cell_keep_row(gates: &mut [f32], x: &[f32], c: &[f32], h_out: &mut [f32], c_out: &mut [f32]) {
        let h = c.len().min(h_out.len()).min(c_out.len()).min(gates.len() / 4).min(x.len() / 4);
        let (c, h_out, c_out) = (&c[..h], &mut h_out[..h], &mut c_out[..h]);
        let (xi, xf, xg, xo) = (&x[..h], &x[h..2 * h], &x[2 * h..3 * h], &x[3 * h..4 * h]);
        let (gi, rest) = gates.split_at_mut(h);
        let (gf, rest) = rest.split_at_mut(h);
        let (gg, go) = rest.split_at_mut(h);
        let (gf, gg, go) = (&mut gf[..h], &mut gg[..h], &mut go[..h]);
        for j in 0..h {
            let (i, f) = (sigmoid_f32(xi[j] + gi[j]), sigmoid_f32(xf[j] + gf[j]));
            let (g, o) = (tanh_f32(xg[j] + gg[j]), sigmoid_f32(xo[j] + go[j]));
            let c_new = f * c[j] + i * g;
            h_out[j] = o * tanh_f32(c_new);
            c_out[j] = c_new;
            (gi[j], gf[j], gg[j], go[j]) = (i, f, g, o);
        }
    }
}

simd_fn! {
    /// [`lstm_cell_backward_row`] from the activated gates [`lstm_cell_keep_row`] left, and
    /// the gradient of h' as two terms (`dh[0] + dh[1]`: the output's and the next step's).
    fn lstm_cell_backward_kept_row(act: &[f32], c: &[f32], c_new: &[f32], dh: [&[f32]; 2], dc_new: &[f32], dgates: &mut [f32], dc: &mut [f32]) {
        let [dh, dh_more] = dh;
        let h = c.len().min(c_new.len()).min(dh.len()).min(dh_more.len()).min(dc_new.len()).min(dc.len()).min(act.len() / 4).min(dgates.len() / 4);
        let (c, c_new, dh, dh_more, dc_new, dc) = (&c[..h], &c_new[..h], &dh[..h], &dh_more[..h], &dc_new[..h], &mut dc[..h]);
        let (ai, af, ag, ao) = (&act[..h], &act[h..2 * h], &act[2 * h..3 * h], &act[3 * h..4 * h]);
        let (di, rest) = dgates.split_at_mut(h);
        let (df, rest) = rest.split_at_mut(h);
        let (dg, do_) = rest.split_at_mut(h);
        let (df, dg, do_) = (&mut df[..h], &mut dg[..h], &mut do_[..h]);
        for j in 0..h {
            let (i, f, g, o) = (ai[j], af[j], ag[j], ao[j]);
            let d_h = dh[j] + dh_more[j];
            let tanh_c = tanh_f32(c_new[j]);
            // c' reaches the loss directly and through h' = o * tanh(c').
            let dc_total = dc_new[j] + d_h * o * (1.0 - tanh_c * tanh_c);
            di[j] = dc_total * g * i * (1.0 - i);
            df[j] = dc_total * c[j] * f * (1.0 - f);
            dg[j] = dc_total * i * (1.0 - g * g);
            do_[j] = d_h * tanh_c * o * (1.0 - o);
            dc[j] = dc_total * f;
        }
    }
}

/// `e^x` within 2 ulp for `x` in [-87, 88]: `2^n e^r` with `r = x - n ln 2` in
/// [-ln 2 / 2, ln 2 / 2] and `e^r` from Cephes' `expf` polynomial. Below -87 it is 0 (true
/// value under 1.7e-38), past 88 it is `e^88`, and NaN stays NaN.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, so `n ln 2` is exact in the high part.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 * 2^23 rounds to an integer in the low mantissa bits, without a rounding
    // instruction the baseline x86-64 target lacks.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(-87.0, 88.0);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    // `n` sits in the low bits of the rounded sum's pattern, offset by ROUND's own; an integer
    // subtract and shift make `2^n` from it (an `as i32` is a saturating conversion, which
    // costs a compare-and-fix sequence per lane).
    let biased = t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127);
    let scale = f32::from_bits(biased << 23);
    if x < -87.0 {
        0.0
    } else {
        er * scale
    }
}

simd_fn! {
    /// `y = ln x` over matching slices (the `log` primitive on dense data).
    fn ln_slice(x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &mut y[..n]);
        for i in 0..n {
            y[i] = ln_f32(x[i]);
        }
    }
}

/// `ln x` within 2 ulp, Cephes' `logf`: `x = 2^e m` with `m` in [sqrt(1/2), sqrt(2)), and
/// `ln m` from a polynomial in `m - 1`. Exact at the edges as libm: `ln 0 = -inf`,
/// `ln inf = inf`, NaN for negatives and NaN; subnormals are scaled into range first.
#[inline(always)]
pub(crate) fn ln_f32(x: f32) -> f32 {
    const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    // ln 2 in two parts, so `e ln 2` is exact in the high part.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let tiny = x < f32::MIN_POSITIVE;
    let scaled = if tiny { x * 8_388_608.0 } else { x };
    let bits = scaled.to_bits();
    // The exponent that puts the mantissa in [0.5, 1).
    let e = ((bits >> 23) & 0xff) as i32 - 126 - if tiny { 23 } else { 0 };
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < SQRT_HALF;
    let e = (e - low as i32) as f32;
    let r = if low { m + m - 1.0 } else { m - 1.0 };
    let z = r * r;
    let p = 7.037_683_6e-2;
    let p = p * r - 1.151_461e-1;
    let p = p * r + 1.167_699_9e-1;
    let p = p * r - 1.242_014_1e-1;
    let p = p * r + 1.424_932_3e-1;
    let p = p * r - 1.666_805_8e-1;
    let p = p * r + 2.000_071_5e-1;
    let p = p * r - 2.499_999_4e-1;
    let p = p * r + 3.333_333e-1;
    let y = p * r * z + e * LN2_LO - 0.5 * z;
    let ln = r + y + e * LN2_HI;
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x < 0.0 || x.is_nan() {
        f32::NAN
    } else if x == f32::INFINITY {
        x
    } else {
        ln
    }
}

/// `erf(x)` within 1e-6 absolute: Abramowitz and Stegun 7.1.26 (error 1.5e-7 in exact
/// arithmetic, the rest f32 rounding) on [`exp_f32`].
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_8) * t - 0.284_496_74) * t + 0.254_829_6) * t;
    (1.0 - poly * exp_f32(-a * a)).copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_matches_libm() {
        // Every 9973rd positive finite value, subnormals included.
        for bits in (1..f32::INFINITY.to_bits()).step_by(9973) {
            let x = f32::from_bits(bits);
            let (got, want) = (ln_f32(x), libm::logf(x));
            assert!((got - want).abs() <= 2.0 * f32::EPSILON * want.abs().max(1e-30), "ln({x:e}) = {got}, libm {want}");
        }
        for i in 1..=4000 {
            let x = i as f32 / 2000.0;
            let (got, want) = (ln_f32(x), libm::logf(x));
            assert!((got - want).abs() <= 2.0 * f32::EPSILON * want.abs().max(f32::EPSILON), "ln({x}) = {got}, libm {want}");
        }
        assert_eq!(ln_f32(1.0), 0.0);
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_f32(-1.0).is_nan() && ln_f32(f32::NEG_INFINITY).is_nan() && ln_f32(f32::NAN).is_nan());
        let xs: Vec<f32> = (1..100).map(|i| i as f32 * 0.37).collect();
        let mut ys = vec![0.0; xs.len()];
        ln_slice(&xs, &mut ys);
        assert!(xs.iter().zip(&ys).all(|(&x, &y)| y == ln_f32(x)));
    }

    #[test]
    fn exp_and_erf_match_libm() {
        for i in -2000..=2000 {
            let x = i as f32 * 0.0441;
            let (got, want) = (exp_f32(x), libm::expf(x));
            // Below -87 the result is 0 and past 88 it is e^88, by design (documented above).
            let want = if x < -87.0 { 0.0 } else { want.min(libm::expf(88.0)) };
            assert!((got - want).abs() <= 3.0 * f32::EPSILON * want, "exp({x}) = {got}, libm {want}");
            let (got, want) = (erf_f32(x / 20.0), libm::erff(x / 20.0));
            assert!((got - want).abs() <= 1e-6, "erf({}) = {got}, libm {want}", x / 20.0);
        }
        assert_eq!(exp_f32(-100.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan() && erf_f32(f32::NAN).is_nan());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
    }

    #[test]
    fn tanh_and_sigmoid_match_libm() {
        for i in -4000i32..=4000 {
            // Dense near 0, where `1 - e^-2|x|` cancels, and out to +-40.
            let x = if i.abs() < 2000 { i as f32 * 1e-4 } else { i as f32 * 0.01 };
            let (got, want) = (tanh_f32(x), libm::tanhf(x));
            assert!((got - want).abs() <= 1e-7 + 1e-6 * want.abs(), "tanh({x}) = {got}, libm {want}");
            let (got, want) = (sigmoid_f32(x), 1.0 / (1.0 + libm::expf(-x)));
            assert!((got - want).abs() <= 1e-7 + 1e-6 * want.abs(), "sigmoid({x}) = {got}, libm {want}");
        }
        assert!(tanh_f32(f32::NAN).is_nan() && sigmoid_f32(f32::NAN).is_nan());
        assert_eq!((tanh_f32(f32::INFINITY), tanh_f32(f32::NEG_INFINITY)), (1.0, -1.0));
    }
}
