// Three f32s whose sum is exactly the f64 value.
fn value_() -> S_x { return f64(bitcast<f32>(p.value[0])) + f64(bitcast<f32>(p.value[1])) + f64(bitcast<f32>(p.value[2])); }
