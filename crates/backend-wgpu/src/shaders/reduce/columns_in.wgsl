// f32 or f16 columns as stored (`S_x`), four a vector.
@group(0) @binding(1) var<storage, read> x: array<vec4<S_x>>;
fn load4_(k: u32) -> vec4<f32> { return vec4<f32>(x[k]); }
