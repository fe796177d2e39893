// a read in aligned vec4s (a scalar read picks one lane).
@group(0) @binding(1) var<storage, read> a: array<vec4<S_x>>;
fn fetch_a4(i: u32) -> vec4<C_x> { return vec4<C_x>(a[i / 4u]); }
fn fetch_a(i: u32) -> C_x { return load_x(a[i / 4u][i % 4u]); }
