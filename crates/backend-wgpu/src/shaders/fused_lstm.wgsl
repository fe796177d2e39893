// Helpers of the fused LSTM cell kernels (forward and backward), computed in f32 (the
// activations are fused_rnn.wgsl's).
//
// `CellParams` (`fused.rs`): p.units = N * H (one invocation per hidden unit of a batch row),
// p.h = H, p.offsets = the element offset of each input in binding order. `more`, the second gate term of
// `lstm_cell_sum`, is bound in both kernels; without one (SUM false) it is `gates` again, unread.

// The pre-activation at `j` of `gates` [N, 4H] (at element offset p.offsets[0]), plus the second
// gate term's (`more`, input MORE, at offset p.offsets[MORE]) when SUM, the sum rounded to the dtype as an add
// kernel would round it.
fn gate_(j: u32) -> f32 {
  let a = load_x(gates[p.offsets[0] + j]);
  if (SUM) {
    return load_x(store_x(a + load_x(more[p.offsets[MORE] + j])));
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
