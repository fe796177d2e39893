// The chunk of dy at element k, as x's (batch_norm_io/x.wgsl).
fn dy_chunk_(k: u32) -> vec4<f32> { return vec4<f32>(f32(load_x(dy[k])), 0.0, 0.0, 0.0); }
