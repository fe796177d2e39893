// SGD's step (`SgdConfig`): param, grad to param' (and with momentum, `direction` reads the
// momentum buffer and writes its new value), in the composite's order of operations.

// The first step: the buffer starts at the gradient.
const FIRST: u32 = 4u;
const NESTEROV: u32 = 8u;
// Dampening is not 0.
const DAMPENING: u32 = 16u;

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read_write> param_out: array<S_x>;

// Element `e` of the tensor (the entry point is `one.wgsl`'s or `foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[p.param_at + e]);
  var g = load_x(grad[p.grad_at + e]);
  if (flag(MAXIMIZE)) { g = -g; }
  if (flag(DECAY)) { g = round_x(g + round_x(p0 * p.weight_decay)); }
  param_out[e] = store_x(p0 - round_x(direction(e, g) * p.lr));
}
