// The f64 pad value, as three f32s in params[14..17] whose sum is exact (see `split_pad`).
fn pad_() -> S_x { return f64(bitcast<f32>(params[14])) + f64(bitcast<f32>(params[15])) + f64(bitcast<f32>(params[16])); }
