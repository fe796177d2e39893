// a held as packed bf16 (packed/words.wgsl), read in aligned runs of four (two words).
@group(0) @binding(1) var<storage, read> a: array<vec2<u32>>;
fn fetch_a4(i: u32) -> vec4<C_x> { return widen4_(a[i / 4u]); }
fn fetch_a(i: u32) -> C_x { return widen_(a[i / 4u][(i % 4u) / 2u], i); }
