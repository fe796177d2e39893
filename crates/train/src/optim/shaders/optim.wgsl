// Helpers of the fused updates (Adam, SGD, RMSprop, Adagrad, Adadelta, and the loss scaler's
// Scale), which compute in f32. The optimizers' files also take gradient.wgsl.
//
// Every update reads its parameter block `p` (its rule's `shader_params!` struct): `p.n`
// elements, `p.flags` (the options below, then each rule's own), the element offset of each
// input (`p.param_at`, `p.grad_at`, ...), then the hyper-parameters as f32. Values that change
// per step travel there, never in the source, so one pipeline serves every step.

// The gradient is negated (`maximize`).
const MAXIMIZE: u32 = 1u;
// Weight decay is not 0.
const DECAY: u32 = 2u;

fn flag(bit: u32) -> bool {
  return (p.flags & bit) != 0u;
}

// `v` rounded to the dtype, as the composite stores every intermediate.
fn round_x(v: f32) -> f32 {
  return quantize_x(v);
}

// A hyper-parameter as the composite multiplies by it: a scalar of the dtype (in f16 an eps of
// 1e-8 is 0 there, and so here).
fn hyper_x(v: f32) -> f32 {
  return round_x(v);
}
