// The forward's bias on cooperative matrices (ops::Conv2dBias): added to row m of a group's
// output in f32, before y's one rounding; p.bias_offset is its offset, group_row (conv.wgsl)
// the group's first output channel. With RELU (ops::Conv2dBiasRelu) the sum then goes through
// ReLU: kept where above 0, else 0 (NaN too, as ops::Relu).
@group(0) @binding(4) var<storage, read> bias_: array<S_x>;
fn finish_(m: u32, v: f32) -> f32 {
    let y = v + f32(load_x(bias_[p.bias_offset + group_row + m]));
    if (RELU) {
        return select(0.0, y, y > 0.0);
    }
    return y;
}
