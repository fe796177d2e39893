// PyTorch's pow: negative bases with integral exponents keep their sign; others are NaN.
fn op_(a: C_x, b: C_x) -> C_x {
    if (a >= C_x(0)) {
        if (a == C_x(0) && b == C_x(0)) { return C_x(1); }
        return pow(a, b);
    }
    if (b != floor(b)) { return (a - a) / (a - a); }
    let m = pow(-a, b);
    if (b - C_x(2) * floor(b / C_x(2)) == C_x(1)) { return -m; }
    return m;
}
