// A linear layer's bias, one value per column of y, added to columns n..n+3 of a row as the
// tile stores them (ops::MatmulBias): p.bias_offset is the bias's offset. Columns past N
// read its last value (their sums are not stored).
@group(0) @binding(4) var<storage, read> bias_: array<S_x>;
fn bias_at(n: u32) -> C_x { return load_x(bias_[p.bias_offset + min(n, p.n - 1u)]); }
fn epilogue(m: u32, n: u32, v: vec4<C_x>) -> vec4<C_x> {
    return v + vec4<C_x>(bias_at(n), bias_at(n + 1u), bias_at(n + 2u), bias_at(n + 3u));
}
