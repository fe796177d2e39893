// A linear layer's bias (bias.wgsl) added to each finished sum, and GELU of the result written
// beside y (ops::LinearGelu): g[m * N + n], one product of finished sums. Columns past N are
// neither read nor written.
@group(0) @binding(4) var<storage, read> bias_: array<S_x>;
@group(0) @binding(5) var<storage, read_write> gelu_: array<S_x>;
fn bias_at(n: u32) -> C_x { return load_x(bias_[p.bias_offset + min(n, p.n - 1u)]); }
fn store_gelu(at: u32, n: u32, v: C_x) {
    if (n < p.n) { gelu_[at] = store_x(v * normal_cdf(v)); }
}
fn epilogue(m: u32, n: u32, v: vec4<C_x>) -> vec4<C_x> {
    let y = v + vec4<C_x>(bias_at(n), bias_at(n + 1u), bias_at(n + 2u), bias_at(n + 3u));
    let at = m * p.n + n;
    store_gelu(at, n, y.x);
    store_gelu(at + 1u, n + 1u, y.y);
    store_gelu(at + 2u, n + 2u, y.z);
    store_gelu(at + 3u, n + 3u, y.w);
    return y;
}
