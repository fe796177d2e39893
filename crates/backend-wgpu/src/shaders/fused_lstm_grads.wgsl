// The backward of the LSTM cell for one unit (the kernels' files bind the operands; the
// inputs are fused_lstm_cell_backward.wgsl's).

struct CellGrads {
  // The gradients of the pre-activations i, f, g, o.
  dgates: vec4<f32>,
  dc: f32,
}

// Unit e's gradients in f32, unrounded.
fn grads_(e: u32) -> CellGrads {
  let a = gates_of(e);
  let tanh_c = tanh_(in_out_(p.offsets[2] + p.units + e));
  let dh = in_dh_(p.offsets[3] + e);
  // c' reaches the loss directly and through h' = o * tanh(c').
  let dc_total = in_dc_(p.offsets[4] + e) + dh * a.w * (1.0 - tanh_c * tanh_c);
  let dgates = vec4<f32>(
    dc_total * a.z * a.x * (1.0 - a.x),
    dc_total * in_c_(p.offsets[1] + e) * a.y * (1.0 - a.y),
    dc_total * a.x * (1.0 - a.z * a.z),
    dh * tanh_c * a.w * (1.0 - a.w),
  );
  return CellGrads(dgates, dc_total * a.y);
}
