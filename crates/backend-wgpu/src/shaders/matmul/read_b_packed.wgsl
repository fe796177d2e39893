// b held as packed bf16 (packed/words.wgsl), widened as it is read.
@group(0) @binding(2) var<storage, read> b: array<u32>;
fn fetch_b(i: u32) -> C_x { return widen_(b[i >> 1u], i); }
fn fetch_b4(i: u32) -> vec4<C_x> { return vec4<C_x>(fetch_b(i), fetch_b(i + 1u), fetch_b(i + 2u), fetch_b(i + 3u)); }
