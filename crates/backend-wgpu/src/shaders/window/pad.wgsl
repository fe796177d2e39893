// The pad value, as f32 bits in p.extra[0], rounded to the dtype.
fn pad_() -> S_x { return store_x(bitcast<f32>(p.extra[0])); }
