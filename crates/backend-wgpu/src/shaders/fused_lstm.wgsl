// Helpers of the fused LSTM cell kernels (forward and backward), computed in f32 (the
// activations are fused_rnn.wgsl's).
//
// params[0] = N * H (one invocation per hidden unit of a batch row), params[1] = H, then the
// element offset of each input in binding order. `more`, the second gate term of
// `lstm_cell_sum`, is bound in both kernels; without one (SUM false) it is `gates` again, unread.

// The pre-activation at `j` of `gates` [N, 4H] (at element offset params[2]), plus the second
// gate term's (`more`, at offset params[MORE]) when SUM, the sum rounded to the dtype as an add
// kernel would round it.
fn gate_(j: u32) -> f32 {
  let a = load_x(gates[params[2] + j]);
  if (SUM) {
    return load_x(store_x(a + load_x(more[params[MORE] + j])));
  }
  return a;
}

// The four gates of unit `e` (row e / H, column e % H), activated: i, f, g, o.
fn gates_of(e: u32) -> vec4<f32> {
  let h = params[1];
  let at = (e / h) * 4u * h + e % h;
  return vec4<f32>(
    sigmoid_(gate_(at)),
    sigmoid_(gate_(at + h)),
    tanh_(gate_(at + 2u * h)),
    sigmoid_(gate_(at + 3u * h)),
  );
}
