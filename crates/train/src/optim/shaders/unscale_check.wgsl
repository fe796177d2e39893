// The loss scaler's unscale and check (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`):
// scale.wgsl's product, and the check marked (`found_nonfinite`, the multi-tensor kernel's)
// where the stored value is infinite or NaN, its exponent bits all set. f32 only. The factor
// (`unscale_factor`, the multi-tensor kernel's) is the parameter block's, or the inverse scale
// in the scaler's state on the device.

@group(0) @binding(1) var<storage, read> values: array<S_x>;
@group(0) @binding(2) var<storage, read_write> values_out: array<S_x>;

// Element `e` unscaled from its value `v`, stored and checked.
fn unscale_store(e: u32, v: f32) {
  let s = store_x(v * hyper_x(unscale_factor()));
  values_out[e] = s;
  if ((bitcast<u32>(s) & 0x7f800000u) == 0x7f800000u) {
    found_nonfinite();
  }
}

fn update(e: u32) {
  unscale_store(e, load_x(values[p.values_at + e]));
}

// Elements e, e + 256, e + 512 and e + 768 (a whole block of the multi-tensor kernel), every
// load before any store, so that an invocation has four loads in flight, not one: the
// compiler keeps a load after a store to the same buffer.
fn update4(e: u32) {
  var v: array<f32, 4>;
  for (var r = 0u; r < 4u; r++) {
    v[r] = load_x(values[p.values_at + e + 256u * r]);
  }
  for (var r = 0u; r < 4u; r++) {
    unscale_store(e + 256u * r, v[r]);
  }
}
