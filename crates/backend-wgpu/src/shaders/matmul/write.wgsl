// y written in scalars.
@group(0) @binding(3) var<storage, read_write> y: array<Y>;
fn store_y(i: u32, v: C_x) { y[i] = round_(v); }
fn store_y4(i: u32, v: vec4<C_x>) { store_y(i, v.x); store_y(i + 1u, v.y); store_y(i + 2u, v.z); store_y(i + 3u, v.w); }
// Two neighbouring elements (matmul_coop.wgsl's PAIRS, where y is packed bf16: write2_packed.wgsl).
fn store_y2(i: u32, n: u32, a: C_x, b: C_x) { store_y(i, a); store_y(i + 1u, b); }
