// b held as packed bf16 (`packed.rs`), read in aligned runs of four (two words) and widened.
@group(0) @binding(2) var<storage, read> b: array<vec2<u32>>;
fn fetch_b4(i: u32) -> vec4<C_x> {
    let w = b[i / 4u];
    return bitcast<vec4<f32>>(vec4<u32>(w.x << 16u, w.x & 0xffff0000u, w.y << 16u, w.y & 0xffff0000u));
}
fn fetch_b(i: u32) -> C_x {
    let w = b[i / 4u][(i % 4u) / 2u];
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));
}
