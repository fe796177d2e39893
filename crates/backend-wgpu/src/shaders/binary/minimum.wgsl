// minimum propagates NaN, as PyTorch's (see maximum.wgsl).
fn op_(a: C_x, b: C_x) -> C_x {
    if (!(a == a) || !(b == b)) { return a + b; }
    return min(a, b);
}
