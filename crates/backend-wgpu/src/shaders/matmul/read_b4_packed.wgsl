// b held as packed bf16 (packed/words.wgsl), read in aligned runs of four (two words).
@group(0) @binding(2) var<storage, read> b: array<vec2<u32>>;
fn fetch_b4(i: u32) -> vec4<C_x> { return widen4_(b[i / 4u]); }
fn fetch_b(i: u32) -> C_x { return widen_(b[i / 4u][(i % 4u) / 2u], i); }
