// ops::LayerNormBackwardInto (f32): the rows' dx summed into the gradient gathered for x, the
// input after the weight (or after rstd without one).

@group(0) @binding(7) var<storage, read> acc: array<S_x>;

fn summed(i: u32, v: f32) -> f32 {
  return f32(load_x(acc[offset(select(4u, 5u, flag(1u))) + i])) + v;
}
