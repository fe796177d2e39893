// SgdStep with momentum: the buffer (offset params[4]) decays and takes the gradient in; the
// step follows the buffer, or with Nesterov looks one momentum step ahead.

@group(0) @binding(4) var<storage, read> momentum_buffer: array<S_x>;
@group(0) @binding(5) var<storage, read_write> momentum_buffer_out: array<S_x>;

fn direction(e: u32, g: f32) -> f32 {
  let momentum = hyper(6);
  var buf = g;
  if (!flag(4u)) {
    let kept = round_x(load_x(momentum_buffer[params[4] + e]) * momentum);
    if (flag(16u)) {
      buf = round_x(kept + round_x(g * hyper(7)));
    } else {
      buf = round_x(kept + g);
    }
  }
  momentum_buffer_out[e] = store_x(buf);
  if (flag(8u)) {
    return round_x(g + round_x(buf * momentum));
  }
  return buf;
}
