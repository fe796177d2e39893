// Element k of x as stored (A_x = S_x).
fn in_x_(k: u32) -> f32 { return f32(load_x(x[k])); }
