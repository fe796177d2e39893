// Helpers of the fused optimizer updates (Adam, SGD, RMSprop, Adagrad, Adadelta), which
// compute in f32.
//
// params[0] = number of elements, params[1] = option flags, then the element offset of each
// input in binding order, then the hyper-parameters as f32 bits (each kernel's file says which
// word holds which): values that change per step travel here, never in the source, so one
// pipeline serves every step.

fn hyper(k: u32) -> f32 {
  return bitcast<f32>(params[k]);
}

fn flag(bit: u32) -> bool {
  return (params[1] & bit) != 0u;
}

// `v` rounded to the dtype, as the composite stores every intermediate.
fn round_x(v: f32) -> f32 {
  return quantize_x(v);
}

// Hyper-parameter `k` as the composite multiplies by it: a scalar of the dtype (in f16 an eps of
// 1e-8 is 0 there, and so here).
fn hyper_x(k: u32) -> f32 {
  return round_x(hyper(k));
}

// Element `e`'s gradient as the composite takes it: negated when maximizing (flag 1), plus
// weight decay `hyper_x(wd) * param` (flag 2). Reads the `grad` binding of the update's file.
fn gradient(e: u32, p0: f32, wd: u32) -> f32 {
  var g = load_x(grad[params[3] + e]);
  if (flag(1u)) { g = -g; }
  if (flag(2u)) { g = round_x(g + round_x(p0 * hyper_x(wd))); }
  return g;
}
