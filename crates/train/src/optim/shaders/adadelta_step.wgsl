// Adadelta's step (`AdadeltaConfig`): param, grad, square_avg, acc_delta to param',
// square_avg', acc_delta', in the composite's order of operations.

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> square_avg: array<S_x>;
@group(0) @binding(4) var<storage, read> acc_delta: array<S_x>;
@group(0) @binding(5) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(6) var<storage, read_write> square_avg_out: array<S_x>;
@group(0) @binding(7) var<storage, read_write> acc_delta_out: array<S_x>;

// Element `e` of the tensor (the entry point is `one.wgsl`'s or `foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[p.param_at + e]);
  let g = gradient(e, p0);
  let sq = round_x(round_x(load_x(square_avg[p.square_avg_at + e]) * hyper_x(p.rho)) + round_x(round_x(g * hyper_x(p.rho_rest)) * g));
  let denom = round_x(sqrt(round_x(sq + hyper_x(p.eps))));
  let acc0 = load_x(acc_delta[p.acc_delta_at + e]);
  let delta = round_x(round_x(round_x(sqrt(round_x(acc0 + hyper_x(p.eps)))) / denom) * g);
  param_out[e] = store_x(p0 + round_x(delta * hyper_x(p.neg_lr)));
  square_avg_out[e] = store_x(sq);
  acc_delta_out[e] = store_x(round_x(round_x(acc0 * hyper_x(p.rho)) + round_x(round_x(delta * hyper_x(p.rho_rest)) * delta)));
}
