// The value as f32 bits, rounded to the dtype.
fn value_() -> S_x { return store_x(bitcast<f32>(p.value[0])); }
