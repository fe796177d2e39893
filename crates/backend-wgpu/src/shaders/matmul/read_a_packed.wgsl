// a held as packed bf16 (two to a word, element 2w in the low half: `packed.rs`), widened as it
// is read.
@group(0) @binding(1) var<storage, read> a: array<u32>;
fn fetch_a(i: u32) -> C_x {
    let w = a[i >> 1u];
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));
}
fn fetch_a4(i: u32) -> vec4<C_x> { return vec4<C_x>(fetch_a(i), fetch_a(i + 1u), fetch_a(i + 2u), fetch_a(i + 3u)); }
