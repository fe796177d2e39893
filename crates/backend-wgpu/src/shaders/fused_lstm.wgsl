// Helpers of the fused LSTM cell kernels (forward and backward), computed in f32 (the
// activations are fused_rnn.wgsl's). Each kernel's own file binds its operands and reads them
// through `in_gates_`, `in_more_`, `in_c_` (and the backward's `in_out_`, `in_dh_`, `in_dc_`):
// elements of the dtype as stored, or of packed bf16 (`lstm_cell_packed.wgsl`).
//
// `CellParams` (`fused.rs`): p.units = N * H (one invocation per hidden unit of a batch row),
// p.h = H, p.offsets = the element offset of each input in binding order. `more`, the second gate term of
// `lstm_cell_sum`, is bound in both kernels; without one (SUM false) it is `gates` again, unread.

// The pre-activation at `j` of `gates` [N, 4H] (at element offset p.offsets[0]), plus the second
// gate term's (`more`, input MORE, at offset p.offsets[MORE]) when SUM, the sum rounded to the dtype as an add
// kernel would round it.
fn gate_(j: u32) -> f32 {
  let a = in_gates_(p.offsets[0] + j);
  if (SUM) {
    return load_x(store_x(a + in_more_(p.offsets[MORE] + j)));
  }
  return a;
}

// The four gates of unit `e` (row e / H, column e % H), activated: i, f, g, o.
fn gates_of(e: u32) -> vec4<f32> {
  let h = p.h;
  let at = (e / h) * 4u * h + e % h;
  return vec4<f32>(
    sigmoid_(gate_(at)),
    sigmoid_(gate_(at + h)),
    tanh_(gate_(at + 2u * h)),
    sigmoid_(gate_(at + 3u * h)),
  );
}

// Unit e's new state (h', c') in f32, unrounded: c' = f * c + i * g, h' = o * tanh(c').
fn cell_(e: u32) -> vec2<f32> {
  let a = gates_of(e);
  let c_new = a.y * in_c_(p.offsets[1] + e) + a.x * a.z;
  return vec2<f32>(a.w * tanh_(c_new), c_new);
}
