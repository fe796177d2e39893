// Three f32s whose sum is exactly the f64 value.
fn value_() -> S_x { return f64(bitcast<f32>(params[1])) + f64(bitcast<f32>(params[2])) + f64(bitcast<f32>(params[3])); }
