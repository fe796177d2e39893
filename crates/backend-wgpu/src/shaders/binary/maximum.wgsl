// maximum propagates NaN, as PyTorch's. (`x != x` is not a NaN test here: `!=` compiles to
// an ordered comparison, false when either side is NaN.)
fn op_(a: C_x, b: C_x) -> C_x {
    if (!(a == a) || !(b == b)) { return a + b; }
    return max(a, b);
}
