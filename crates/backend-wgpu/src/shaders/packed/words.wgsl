// Packed bf16 words (`packed.rs`): element e of a view sits in word e / 2, in the low half
// when e is even. (`store_b` is the prelude's rounding to bf16.)

// Element e's value, from its word.
fn widen_(w: u32, e: u32) -> f32 {
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (e & 1u) == 1u));
}

// Four elements from the two words that hold them, the first element aligned.
fn widen4_(w: vec2<u32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(w.x << 16u, w.x & 0xffff0000u, w.y << 16u, w.y & 0xffff0000u));
}

// v rounded to bf16 (to nearest even; a NaN stays a NaN), as the low 16 bits.
fn narrow_(v: f32) -> u32 {
    let b = bitcast<u32>(store_b(v)) >> 16u;
    return select(b, b | 0x40u, !(v == v));
}

// The word of two neighbouring elements: a in the low half, b in the high.
fn narrow2_(a: f32, b: f32) -> u32 {
    return narrow_(a) | (narrow_(b) << 16u);
}
