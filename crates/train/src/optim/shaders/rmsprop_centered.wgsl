// Centered RMSprop: the running mean of the gradient is kept and its square taken from the
// second moment. Its bindings follow the momentum buffer's when there is one: GRAD_AVG is set
// by the kernel's variant.

@group(0) @binding(GRAD_AVG) var<storage, read> grad_avg: array<S_x>;
@group(0) @binding(GRAD_AVG + 1u) var<storage, read_write> grad_avg_out: array<S_x>;

fn mean_square(e: u32, g: f32, sq: f32) -> f32 {
  let m0 = load_x(grad_avg[p.grad_avg_at + e]);
  var m: f32;
  let diff = round_x(g - m0);
  if (flag(LERP_FROM_START)) {
    m = round_x(m0 + round_x(diff * hyper_x(p.alpha_rest)));
  } else {
    m = round_x(g - round_x(diff * hyper_x(p.alpha_lerp)));
  }
  grad_avg_out[e] = store_x(m);
  return round_x(sq + round_x(-m * m));
}
