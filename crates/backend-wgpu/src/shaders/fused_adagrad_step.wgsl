// FusedOp::AdagradStep: param, grad, sum to param', sum', in the composite's order of
// operations. Flags: 1 maximize, 2 weight decay. Offsets at params[2..5] (param, grad, sum).
// Hyper-parameters: [5] weight_decay, [6] eps, [7] -lr / (1 + (step - 1) lr_decay).

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> sum_in: array<S_x>;
@group(0) @binding(4) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(5) var<storage, read_write> sum_out: array<S_x>;

// Element `e` of the tensor (the entry point is `fused_optim_one.wgsl`'s or
// `fused_optim_foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[params[2] + e]);
  let g = gradient(e, p0, 5u);
  let s = round_x(load_x(sum_in[params[4] + e]) + round_x(g * g));
  let denom = round_x(round_x(sqrt(s)) + hyper_x(6));
  param_out[e] = store_x(p0 + round_x(round_x(g / denom) * hyper_x(7)));
  sum_out[e] = store_x(s);
}
