// The forward's bias as packed bf16 (packed/words.wgsl), added to row m of a group's output as
// the tile stores it (conv/bias.wgsl's, read as stored); with RELU the sum then goes through
// ReLU.
@group(0) @binding(4) var<storage, read> bias_: array<u32>;
fn epilogue(m: u32, n: u32, v: vec4<C_x>) -> vec4<C_x> {
    let j = p.bias_offset + group_row + m;
    let y = v + vec4<C_x>(widen_(bias_[j >> 1u], j));
    if (RELU) {
        return select(vec4<C_x>(0.0), y, y > vec4<C_x>(0.0));
    }
    return y;
}
