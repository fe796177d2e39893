// The loss scaler's Scale: x to x * factor, as Tensor::mul_scalar computes it: the factor
// rounded to the dtype (its scalar operand's), the product in f32, rounded on store.

@group(0) @binding(1) var<storage, read> values: array<S_x>;
@group(0) @binding(2) var<storage, read_write> values_out: array<S_x>;

// Element `e` of the tensor (the entry point is `one.wgsl`'s or `foreach.wgsl`'s).
fn update(e: u32) {
  values_out[e] = store_x(load_x(values[p.values_at + e]) * hyper_x(p.factor));
}
