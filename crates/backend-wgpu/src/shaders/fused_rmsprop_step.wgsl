// FusedOp::RmsPropStep: param, grad, square_avg to param', square_avg' (with momentum,
// `direction` reads and writes the momentum buffer; centered, `mean_square` reads and writes
// grad_avg), in the composite's order of operations. Flags: 1 maximize, 2 weight decay, 4 lerp
// from grad_avg (torch.lerp's branch for weights below 0.5). Offsets at params[2..7] (param,
// grad, square_avg, momentum_buffer, grad_avg). Hyper-parameters: [7] weight_decay, [8] alpha,
// [9] 1 - alpha, [10] alpha as the lerp's complement, [11] eps, [12] momentum, [13] -lr.

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> square_avg: array<S_x>;
@group(0) @binding(4) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(5) var<storage, read_write> square_avg_out: array<S_x>;

// Element `e` of the tensor (the entry point is `fused_optim_one.wgsl`'s or
// `fused_optim_foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[params[2] + e]);
  let g = gradient(e, p0, 7u);
  let sq = round_x(round_x(load_x(square_avg[params[4] + e]) * hyper_x(8)) + round_x(round_x(g * hyper_x(9)) * g));
  square_avg_out[e] = store_x(sq);
  let avg = round_x(round_x(sqrt(mean_square(e, g, sq))) + hyper_x(11));
  param_out[e] = store_x(p0 + round_x(direction(e, round_x(g / avg)) * hyper_x(13)));
}
