// The op of a packed copy: the value as it is (bf16 in, bf16 out: no rounding happens).
fn op_(v: f32) -> f32 { return v; }
