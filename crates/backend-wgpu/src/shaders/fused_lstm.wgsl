// Helpers of the fused LSTM cell kernels (forward and backward), computed in f32.
//
// params[0] = N * H (one invocation per hidden unit of a batch row), params[1] = H, then the
// element offset of each input in binding order.

// 1 / (1 + exp(-x)), with exp's argument held below f32 overflow: past it the result is 0 in
// f32 anyway, and some GPUs' fast exp gives NaN rather than inf there.
fn sigmoid_(x: f32) -> f32 {
  return 1.0 / (1.0 + exp(min(-x, 88.0)));
}

// tanh is exactly +-1 in f32 beyond |x| = 9.1; Metal's fast tanh gives NaN for large |x|.
fn tanh_(x: f32) -> f32 {
  return tanh(clamp(x, -15.0, 15.0));
}

// The four gates of unit `e` (row e / H, column e % H) of `gates` [N, 4H] at element offset
// `base`, activated: i, f, g, o.
fn gates_of(e: u32, base: u32) -> vec4<f32> {
  let h = params[1];
  let at = base + (e / h) * 4u * h + e % h;
  return vec4<f32>(
    sigmoid_(load_x(gates[at])),
    sigmoid_(load_x(gates[at + h])),
    tanh_(load_x(gates[at + 2u * h])),
    sigmoid_(load_x(gates[at + 3u * h])),
  );
}
