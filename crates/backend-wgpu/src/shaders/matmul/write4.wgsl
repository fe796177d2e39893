// y written in aligned vec4s.
@group(0) @binding(3) var<storage, read_write> y: array<vec4<Y>>;
fn store_y4(i: u32, v: vec4<C_x>) { y[i / 4u] = vec4<Y>(round_(v.x), round_(v.y), round_(v.z), round_(v.w)); }
fn store_y(i: u32, v: C_x) { y[i / 4u][i % 4u] = round_(v); }
