// Element k of dy as packed bf16 (A_x = u32, two elements a word).
fn in_dy_(k: u32) -> f32 { return widen_(dy[k >> 1u], k); }
