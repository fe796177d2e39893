// Packed bf16 (packed/words.wgsl): a word holds two elements of one run (L even), summed.
@group(0) @binding(1) var<storage, read> x: array<u32>;
fn load_(k: u32) -> f32 { let w = x[k]; return widen_(w, 0u) + widen_(w, 1u); }
