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
  return load_x(store_x(v));
}
