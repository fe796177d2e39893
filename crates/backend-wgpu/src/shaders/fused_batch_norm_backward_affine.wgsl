// The backward passes' map of channel ch's xhat to the forward's output, from its invstd:
// (invstd weight, bias) with the affine parameters (the bias read only for a ReLU's cut), else
// (invstd, 0).
fn affine_(ch: u32, inv: f32) -> vec2<f32> {
  if (!flag(1u)) { return vec2<f32>(inv, 0.0); }
  let scale = inv * f32(load_p(weight[offset(4u) + ch]));
  if (!flag(4u)) { return vec2<f32>(scale, 0.0); }
  return vec2<f32>(scale, f32(load_p(bias[offset(5u) + ch])));
}
