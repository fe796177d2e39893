// Centered RmsPropStep: the running mean of the gradient (offset params[6]) is kept and its
// square taken from the second moment. Its bindings follow the momentum buffer's when there is
// one: GRAD_AVG is set by the kernel's key.

@group(0) @binding(GRAD_AVG) var<storage, read> grad_avg: array<S_x>;
@group(0) @binding(GRAD_AVG + 1u) var<storage, read_write> grad_avg_out: array<S_x>;

fn mean_square(e: u32, g: f32, sq: f32) -> f32 {
  let m0 = load_x(grad_avg[params[6] + e]);
  var m: f32;
  let diff = round_x(g - m0);
  if (flag(4u)) {
    m = round_x(m0 + round_x(diff * hyper_x(9)));
  } else {
    m = round_x(g - round_x(diff * hyper_x(10)));
  }
  grad_avg_out[e] = store_x(m);
  return round_x(sq + round_x(-m * m));
}
