// Adagrad's step (`AdagradConfig`): param, grad, sum to param', sum', in the composite's order
// of operations.

@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> sum_in: array<S_x>;
@group(0) @binding(4) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(5) var<storage, read_write> sum_out: array<S_x>;

// Element `e` of the tensor (the entry point is `one.wgsl`'s or `foreach.wgsl`'s).
fn update(e: u32) {
  let p0 = load_x(param[p.param_at + e]);
  let g = gradient(e, p0);
  let s = round_x(load_x(sum_in[p.sum_at + e]) + round_x(g * g));
  let denom = round_x(round_x(sqrt(s)) + hyper_x(p.eps));
  param_out[e] = store_x(p0 + round_x(round_x(g / denom) * hyper_x(p.neg_clr)));
  sum_out[e] = store_x(s);
}
