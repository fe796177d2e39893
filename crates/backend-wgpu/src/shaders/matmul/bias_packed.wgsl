// A linear layer's bias as packed bf16 (packed/words.wgsl), one value per column of y, added
// to columns n..n+3 of a row as the tile stores them (bias.wgsl's, read as stored).
@group(0) @binding(4) var<storage, read> bias_: array<u32>;
fn bias_at(n: u32) -> C_x {
    let j = p.bias_offset + min(n, p.n - 1u);
    return widen_(bias_[j >> 1u], j);
}
fn epilogue(m: u32, n: u32, v: vec4<C_x>) -> vec4<C_x> {
    return v + vec4<C_x>(bias_at(n), bias_at(n + 1u), bias_at(n + 2u), bias_at(n + 3u));
}
