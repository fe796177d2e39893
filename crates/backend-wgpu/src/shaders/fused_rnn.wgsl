// The activations of the fused LSTM and GRU cell kernels, computed in f32.

// 1 / (1 + exp(-x)), with exp's argument held below f32 overflow: past it the result is 0 in
// f32 anyway, and some GPUs' fast exp gives NaN rather than inf there.
fn sigmoid_(x: f32) -> f32 {
  return 1.0 / (1.0 + exp(min(-x, 88.0)));
}

// tanh is exactly +-1 in f32 beyond |x| = 9.1; Metal's fast tanh gives NaN for large |x|.
fn tanh_(x: f32) -> f32 {
  return tanh(clamp(x, -15.0, 15.0));
}
