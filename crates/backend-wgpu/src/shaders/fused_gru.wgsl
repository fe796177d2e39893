// The gates of the fused GRU cell kernels (forward and backward), computed in f32 (the
// activations are fused_rnn.wgsl's). `CellParams` (`fused.rs`): p.units = N * H, p.h = H,
// p.offsets[0] and p.offsets[1] the element offsets of x_gates and h_gates [N, 3H].

// Where unit `e` (row e / H, column e % H) has its r gate in a [N, 3H] operand.
fn gru_at(e: u32) -> u32 {
  let w = p.h;
  return (e / w) * 3u * w + e % w;
}

// r, z, n and h_n (the recurrent term of n) of unit `e`.
fn gru_gates(e: u32) -> vec4<f32> {
  let w = p.h;
  let x = p.offsets[0] + gru_at(e);
  let y = p.offsets[1] + gru_at(e);
  let r = sigmoid_(load_x(gx[x]) + load_x(gh[y]));
  let z = sigmoid_(load_x(gx[x + w]) + load_x(gh[y + w]));
  let h_n = load_x(gh[y + 2u * w]);
  return vec4<f32>(r, z, tanh_(load_x(gx[x + 2u * w]) + r * h_n), h_n);
}
