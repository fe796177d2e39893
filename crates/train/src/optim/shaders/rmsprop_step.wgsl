// RMSprop's step (`RmsPropConfig`): param, grad, square_avg to param', square_avg' (with
// momentum, `direction` reads and writes the momentum buffer; centered, `mean_square` reads and
// writes grad_avg), in the composite's order of operations.

// torch.lerp's branch for weights below 0.5: lerp from grad_avg.
const LERP_FROM_START: u32 = 4u;

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> square_avg: array<S_x>;
@group(0) @binding(4) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(5) var<storage, read_write> square_avg_out: array<S_x>;

// Element `e` of the tensor (the entry point is `one.wgsl`'s or `foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[p.param_at + e]);
  let g = gradient(e, p0);
  let sq = round_x(round_x(load_x(square_avg[p.square_avg_at + e]) * hyper_x(p.alpha)) + round_x(round_x(g * hyper_x(p.alpha_rest)) * g));
  square_avg_out[e] = store_x(sq);
  let avg = round_x(round_x(sqrt(mean_square(e, g, sq))) + hyper_x(p.eps));
  param_out[e] = store_x(p0 + round_x(direction(e, round_x(g / avg)) * hyper_x(p.neg_lr)));
}
