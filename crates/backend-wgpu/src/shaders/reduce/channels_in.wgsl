// Elements as stored (`S_x`: f32, f16, or bf16 in f32 words).
@group(0) @binding(1) var<storage, read> x: array<S_x>;
fn load_(k: u32) -> f32 { return f32(x[k]); }
