// Element k of dy as stored (A_x = S_x).
fn in_dy_(k: u32) -> f32 { return f32(load_x(dy[k])); }
