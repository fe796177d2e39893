// The forward's bias, added to row m of a group's output as the tile stores it
// (ops::Conv2dBias): p.bias_offset is the bias's offset, group_row (conv.wgsl) the group's
// first output channel. With RELU (ops::Conv2dBiasRelu) the sum then goes through ReLU:
// kept where above 0, else 0 (NaN too, as ops::Relu).
@group(0) @binding(4) var<storage, read> bias_: array<S_x>;
fn epilogue(m: u32, n: u32, v: vec4<C_x>) -> vec4<C_x> {
    let y = v + vec4<C_x>(load_x(bias_[p.bias_offset + group_row + m]));
    if (RELU) {
        return select(vec4<C_x>(0.0), y, y > vec4<C_x>(0.0));
    }
    return y;
}
