// FusedOp::Scale: x to x * factor, as Tensor::mul_scalar computes it: the factor rounded to
// the dtype (its scalar operand's), the product in f32, rounded on store. Offset at params[2]
// (values). Hyper-parameter: [3] the factor.

@group(0) @binding(1) var<storage, read> values: array<S_x>;
@group(0) @binding(2) var<storage, read_write> values_out: array<S_x>;

// Element `e` of the tensor (the entry point is `fused_optim_one.wgsl`'s or
// `fused_optim_foreach.wgsl`'s).
fn update(e: u32) {
  values_out[e] = store_x(load_x(values[params[2] + e]) * hyper_x(3));
}
