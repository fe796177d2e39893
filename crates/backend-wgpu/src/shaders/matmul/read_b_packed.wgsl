// b held as packed bf16 (two to a word, element 2w in the low half: `packed.rs`), widened as it
// is read.
@group(0) @binding(2) var<storage, read> b: array<u32>;
fn fetch_b(i: u32) -> C_x {
    let w = b[i >> 1u];
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));
}
fn fetch_b4(i: u32) -> vec4<C_x> { return vec4<C_x>(fetch_b(i), fetch_b(i + 1u), fetch_b(i + 2u), fetch_b(i + 3u)); }
