// Helpers of the fused updates (Adam, SGD, RMSprop, Adagrad, Adadelta, and the loss scaler's
// Scale), which compute in f32. The optimizers' files also take fused_optim_gradient.wgsl.
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
