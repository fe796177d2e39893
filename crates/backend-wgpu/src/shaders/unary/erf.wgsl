// Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, below f32 resolution near 1. (f32 only: f64
// erf runs on the CPU.)
fn op_(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(z));
    let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(z) * (1.0 - p * exp(-z * z));
}
