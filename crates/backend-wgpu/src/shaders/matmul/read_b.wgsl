// b read in scalars (through any strides).
@group(0) @binding(2) var<storage, read> b: array<S_x>;
fn fetch_b(i: u32) -> C_x { return load_x(b[i]); }
fn fetch_b4(i: u32) -> vec4<C_x> { return vec4<C_x>(fetch_b(i), fetch_b(i + 1u), fetch_b(i + 2u), fetch_b(i + 3u)); }
