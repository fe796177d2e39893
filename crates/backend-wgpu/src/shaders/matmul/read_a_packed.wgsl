// a held as packed bf16 (packed/words.wgsl), widened as it is read.
@group(0) @binding(1) var<storage, read> a: array<u32>;
fn fetch_a(i: u32) -> C_x { return widen_(a[i >> 1u], i); }
fn fetch_a4(i: u32) -> vec4<C_x> { return vec4<C_x>(fetch_a(i), fetch_a(i + 1u), fetch_a(i + 2u), fetch_a(i + 3u)); }
