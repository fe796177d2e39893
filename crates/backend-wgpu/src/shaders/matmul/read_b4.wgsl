// b read in aligned vec4s (a scalar read picks one lane).
@group(0) @binding(2) var<storage, read> b: array<vec4<S_x>>;
fn fetch_b4(i: u32) -> vec4<C_x> { return vec4<C_x>(b[i / 4u]); }
fn fetch_b(i: u32) -> C_x { return load_x(b[i / 4u][i % 4u]); }
