// RMSprop with momentum: the buffer decays and takes the scaled gradient in, and the step
// follows it.

@group(0) @binding(6) var<storage, read> momentum_buffer: array<S_x>;
@group(0) @binding(7) var<storage, read_write> momentum_buffer_out: array<S_x>;

fn direction(e: u32, scaled: f32) -> f32 {
  let buf = round_x(round_x(load_x(momentum_buffer[p.momentum_buffer_at + e]) * hyper_x(p.momentum)) + scaled);
  momentum_buffer_out[e] = store_x(buf);
  return buf;
}
