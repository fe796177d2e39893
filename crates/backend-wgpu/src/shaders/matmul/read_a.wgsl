// a read in scalars (through any strides).
@group(0) @binding(1) var<storage, read> a: array<S_x>;
fn fetch_a(i: u32) -> C_x { return load_x(a[i]); }
fn fetch_a4(i: u32) -> vec4<C_x> { return vec4<C_x>(fetch_a(i), fetch_a(i + 1u), fetch_a(i + 2u), fetch_a(i + 3u)); }
