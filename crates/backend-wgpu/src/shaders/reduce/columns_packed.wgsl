// Packed bf16 columns (packed/words.wgsl), four a pair of words.
@group(0) @binding(1) var<storage, read> x: array<vec2<u32>>;
fn load4_(k: u32) -> vec4<f32> { return widen4_(x[k]); }
