// y written as packed bf16 (two to a word, `packed.rs`) in aligned runs of four: the words of
// a run are this invocation's alone. (Only with OUT4: a scalar store would share its word.)
@group(0) @binding(3) var<storage, read_write> y: array<vec2<u32>>;
// Two rounded values in one word, the first in the low half; a NaN stays a NaN.
fn pack2_(lo: C_x, hi: C_x) -> u32 {
    let a = select(bitcast<u32>(round_(lo)) >> 16u, (bitcast<u32>(lo) >> 16u) | 0x40u, !(lo == lo));
    let b = select(bitcast<u32>(round_(hi)) >> 16u, (bitcast<u32>(hi) >> 16u) | 0x40u, !(hi == hi));
    return a | (b << 16u);
}
fn store_y4(i: u32, v: vec4<C_x>) { y[i / 4u] = vec2<u32>(pack2_(v.x, v.y), pack2_(v.z, v.w)); }
// Never called: this file goes with OUT4, whose stores are all store_y4 (tile.wgsl names both).
fn store_y(i: u32, v: C_x) {}
