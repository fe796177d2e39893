// The output's chunk at element k, as batch_norm_io/write.wgsl's, two values a packed word.
fn write_chunk_(k: u32, v: vec4<f32>) { out_[k >> 1u] = narrow2_(v.x, v.y); }
