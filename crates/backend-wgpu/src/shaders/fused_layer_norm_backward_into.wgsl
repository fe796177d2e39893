// ops::LayerNormBackwardInto (f32): the rows' dx summed into the gradient gathered for x, the
// input after the weight (or after rstd without one).

@group(0) @binding(7) var<storage, read> acc: array<S_x>;

// v reaches the add through p.zero (always 0), which the driver's compiler cannot see through:
// else it fuses the product that made v into the add (one rounding where the composite, the
// backward then the add, takes two), and the sum is not the composite's.
fn summed(i: u32, v: f32) -> f32 {
  let rounded = bitcast<f32>(bitcast<u32>(v) ^ p.zero);
  return f32(load_x(acc[offset(select(4u, 5u, flag(1u))) + i])) + rounded;
}
