// FusedOp::AdadeltaStep: param, grad, square_avg, acc_delta to param', square_avg',
// acc_delta', in the composite's order of operations. Flags: 1 maximize, 2 weight decay.
// Offsets at params[2..6] (param, grad, square_avg, acc_delta). Hyper-parameters:
// [6] weight_decay, [7] rho, [8] 1 - rho, [9] eps, [10] -lr.

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> square_avg: array<S_x>;
@group(0) @binding(4) var<storage, read> acc_delta: array<S_x>;
@group(0) @binding(5) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(6) var<storage, read_write> square_avg_out: array<S_x>;
@group(0) @binding(7) var<storage, read_write> acc_delta_out: array<S_x>;

// Element `e` of the tensor (the entry point is `fused_optim_one.wgsl`'s or
// `fused_optim_foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[params[2] + e]);
  let g = gradient(e, p0, 6u);
  let sq = round_x(round_x(load_x(square_avg[params[4] + e]) * hyper_x(7)) + round_x(round_x(g * hyper_x(8)) * g));
  let denom = round_x(sqrt(round_x(sq + hyper_x(9))));
  let acc0 = load_x(acc_delta[params[5] + e]);
  let delta = round_x(round_x(round_x(sqrt(round_x(acc0 + hyper_x(9)))) / denom) * g);
  param_out[e] = store_x(p0 + round_x(delta * hyper_x(10)));
  square_avg_out[e] = store_x(sq);
  acc_delta_out[e] = store_x(round_x(round_x(acc0 * hyper_x(7)) + round_x(round_x(delta * hyper_x(8)) * delta)));
}
