// Element k of x as packed bf16 (A_x = u32, two elements a word).
fn in_x_(k: u32) -> f32 { return widen_(x[k >> 1u], k); }
