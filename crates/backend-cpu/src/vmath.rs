//! `exp` and `erf` for f32 written as straight-line arithmetic, so a loop of them vectorizes:
//! `libm`'s calls kept the fused softmax and GELU at 20-30 ns an element. Used by those fused
//! kernels only; the primitives (`exp`, `erf`) stay on `libm`, and the conformance suite holds
//! the fused kernels to the primitives' composite.

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
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if x < -87.0 {
        0.0
    } else {
        er * scale
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
}
