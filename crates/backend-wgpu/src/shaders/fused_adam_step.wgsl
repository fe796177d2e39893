// FusedOp::AdamStep: param, grad, exp_avg, exp_avg_sq to param', exp_avg', exp_avg_sq' (and
// with amsgrad, `second_moment` reads max_exp_avg_sq and writes its new value), in the
// composite's order of operations. Flags: 1 maximize, 2 weight decay, 4 decoupled (AdamW),
// 8 lerp from exp_avg (torch.lerp's branch for weights below 0.5). Offsets at params[2..7]
// (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq). Hyper-parameters: [7] weight_decay,
// [8] 1 - lr weight_decay, [9] 1 - beta1, [10] beta1, [11] beta2, [12] 1 - beta2,
// [13] sqrt(1 - beta2^step), [14] eps, [15] -lr / (1 - beta1^step).

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> exp_avg: array<S_x>;
@group(0) @binding(4) var<storage, read> exp_avg_sq: array<S_x>;
@group(0) @binding(5) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(6) var<storage, read_write> exp_avg_out: array<S_x>;
@group(0) @binding(7) var<storage, read_write> exp_avg_sq_out: array<S_x>;

// Element `e` of the tensor (the entry point is `fused_optim_one.wgsl`'s or
// `fused_optim_foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[params[2] + e]);
  var g = load_x(grad[params[3] + e]);
  if (flag(1u)) { g = -g; }
  var p = p0;
  if (flag(2u)) {
    if (flag(4u)) {
      p = round_x(p0 * hyper(8));
    } else {
      g = round_x(g + round_x(p0 * hyper(7)));
    }
  }
  let m0 = load_x(exp_avg[params[4] + e]);
  var m: f32;
  if (flag(8u)) {
    m = m0 + (g - m0) * hyper(9);
  } else {
    m = g - (g - m0) * hyper(10);
  }
  m = round_x(m);
  let sq = round_x(load_x(exp_avg_sq[params[5] + e]) * hyper(11) + g * hyper(12) * g);
  let denom = sqrt(second_moment(e, sq)) / hyper(13) + hyper(14);
  param_out[e] = store_x(p + m / denom * hyper(15));
  exp_avg_out[e] = store_x(m);
  exp_avg_sq_out[e] = store_x(sq);
}
