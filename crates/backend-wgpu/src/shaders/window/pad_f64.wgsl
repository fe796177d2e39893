// The f64 pad value, as three f32s in p.extra whose sum is exact (see `split_pad`).
fn pad_() -> S_x { return f64(bitcast<f32>(p.extra[0])) + f64(bitcast<f32>(p.extra[1])) + f64(bitcast<f32>(p.extra[2])); }
