// FusedOp::SgdStep: param, grad to param' (and with momentum, `direction` reads the momentum
// buffer and writes its new value), in the composite's order of operations. Flags: 1 maximize,
// 2 weight decay, 4 first step (the buffer starts at the gradient), 8 nesterov, 16 dampening.
// Offsets at params[2..5] (param, grad, momentum_buffer). Hyper-parameters: [5] weight_decay,
// [6] momentum, [7] 1 - dampening, [8] lr.

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read_write> param_out: array<S_x>;

// Element `e` of the tensor (the entry point is `fused_optim_one.wgsl`'s or
// `fused_optim_foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[params[2] + e]);
  var g = load_x(grad[params[3] + e]);
  if (flag(1u)) { g = -g; }
  if (flag(2u)) { g = round_x(g + round_x(p0 * hyper(5))); }
  param_out[e] = store_x(p0 - round_x(direction(e, g) * hyper(8)));
}
