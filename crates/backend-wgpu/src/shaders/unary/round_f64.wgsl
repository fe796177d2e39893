// Half to even from floor alone: lavapipe's f64 round() was seen rounding 1.5 to 1. The
// fractional part `v - floor(v)` is exact, so no tie is misjudged (unlike floor(v + 0.5)).
fn op_(v: C_x) -> C_x {
    let f = floor(v);
    let up = f + C_x(1);
    let tie_up = f - C_x(2) * floor(f * C_x(0.5)) != C_x(0);
    return select(select(f, up, v - f > C_x(0.5)), select(f, up, tie_up), v - f == C_x(0.5));
}
