// GELU's gradient at its input h taken as the sums of dy weight are stored
// (ops::MatmulGeluBackward): v (Phi(h) + h phi(h)), with h the [M, N] matrix of y's shape at
// p.bias_offset. Columns past N read its last column (their sums are not stored).
@group(0) @binding(4) var<storage, read> pre_: array<S_x>;
fn gelu_grad_at(row: u32, n: u32) -> C_x {
    let h = load_x(pre_[row + min(n, p.n - 1u)]);
    // phi(h) = exp(-h^2 / 2) / sqrt(2 pi)
    return normal_cdf(h) + h * exp(-0.5 * h * h) * 0.39894228040143268;
}
fn epilogue(m: u32, n: u32, v: vec4<C_x>) -> vec4<C_x> {
    let row = p.bias_offset + m * p.n;
    return v * vec4<C_x>(gelu_grad_at(row, n), gelu_grad_at(row, n + 1u), gelu_grad_at(row, n + 2u), gelu_grad_at(row, n + 3u));
}
