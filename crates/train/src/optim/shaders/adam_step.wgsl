// Adam's step (`AdamConfig`, AdamW's too): param, grad, exp_avg, exp_avg_sq to param',
// exp_avg', exp_avg_sq' (and with amsgrad, `second_moment` reads max_exp_avg_sq and writes its
// new value), in the composite's order of operations.

// AdamW's decay: the parameter shrunk, not an L2 term in the gradient.
const DECOUPLED: u32 = 4u;
// torch.lerp's branch for weights below 0.5: lerp from exp_avg.
const LERP_FROM_START: u32 = 8u;

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> exp_avg: array<S_x>;
@group(0) @binding(4) var<storage, read> exp_avg_sq: array<S_x>;
@group(0) @binding(5) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(6) var<storage, read_write> exp_avg_out: array<S_x>;
@group(0) @binding(7) var<storage, read_write> exp_avg_sq_out: array<S_x>;

// Element `e` of the tensor (the entry point is `one.wgsl`'s or `foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[p.param_at + e]);
  var g = load_x(grad[p.grad_at + e]);
  if (flag(MAXIMIZE)) { g = -g; }
  var kept = p0;
  if (flag(DECAY)) {
    if (flag(DECOUPLED)) {
      kept = round_x(p0 * p.shrink);
    } else {
      g = round_x(g + round_x(p0 * p.weight_decay));
    }
  }
  let m0 = load_x(exp_avg[p.exp_avg_at + e]);
  var m: f32;
  if (flag(LERP_FROM_START)) {
    m = m0 + (g - m0) * p.w1;
  } else {
    m = g - (g - m0) * p.w1_rest;
  }
  m = round_x(m);
  let sq = round_x(load_x(exp_avg_sq[p.exp_avg_sq_at + e]) * p.beta2 + g * p.beta2_rest * g);
  let denom = sqrt(second_moment(e, sq)) / p.bias_correction2_sqrt + p.eps;
  param_out[e] = store_x(kept + m / denom * p.neg_step_size);
  exp_avg_out[e] = store_x(m);
  exp_avg_sq_out[e] = store_x(sq);
}
