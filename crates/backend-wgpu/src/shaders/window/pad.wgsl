// The pad value, as f32 bits in params[14], rounded to the dtype.
fn pad_() -> S_x { return store_x(bitcast<f32>(params[14])); }
