// SGD with momentum: the buffer decays and takes the gradient in; the step follows the buffer,
// or with Nesterov looks one momentum step ahead.

@group(0) @binding(4) var<storage, read> momentum_buffer: array<S_x>;
@group(0) @binding(5) var<storage, read_write> momentum_buffer_out: array<S_x>;

fn direction(e: u32, g: f32) -> f32 {
  var buf = g;
  if (!flag(FIRST)) {
    let kept = round_x(load_x(momentum_buffer[p.momentum_buffer_at + e]) * p.momentum);
    if (flag(DAMPENING)) {
      buf = round_x(kept + round_x(g * p.dampening_rest));
    } else {
      buf = round_x(kept + g);
    }
  }
  momentum_buffer_out[e] = store_x(buf);
  if (flag(NESTEROV)) {
    return round_x(g + round_x(buf * p.momentum));
  }
  return buf;
}
