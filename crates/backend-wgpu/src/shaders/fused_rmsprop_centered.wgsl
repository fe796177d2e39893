// Centered RmsPropStep: the running mean of the gradient (offset params[6]) is kept and its
// square taken from the second moment. Its bindings follow the momentum buffer's when there is
// one: GRAD_AVG is set by the kernel's key.

@group(0) @binding(GRAD_AVG) var<storage, read> grad_avg: array<S_x>;
@group(0) @binding(GRAD_AVG + 1u) var<storage, read_write> grad_avg_out: array<S_x>;

fn mean_square(e: u32, g: f32, sq: f32) -> f32 {
  let m0 = load_x(grad_avg[params[6] + e]);
  var m: f32;
  if (flag(4u)) {
    m = m0 + (g - m0) * hyper(9);
  } else {
    m = g - (g - m0) * hyper(10);
  }
  m = round_x(m);
  grad_avg_out[e] = store_x(m);
  return round_x(sq + round_x(-m * m));
}
