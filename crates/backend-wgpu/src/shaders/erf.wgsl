// erf in f32 for kernels that compose it with more arithmetic (the unary kernel keeps its own
// copy until shader helpers are shared by file). Abramowitz & Stegun 7.1.26: |error| < 1.5e-7.
fn erf_(z: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.3275911 * abs(z));
  let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(z) * (1.0 - p * exp(-z * z));
}

// The standard normal CDF Phi(x).
fn normal_cdf(x: f32) -> f32 {
  return 0.5 * (1.0 + erf_(x * 0.70710678118654752));
}
