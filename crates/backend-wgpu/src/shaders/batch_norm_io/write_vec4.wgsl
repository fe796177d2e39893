// The output's chunk at element k, as batch_norm_io/write.wgsl's, four values a vec4.
fn write_chunk_(k: u32, v: vec4<f32>) {
  out_[k >> 2u] = vec4<S_x>(store_x(C_x(v.x)), store_x(C_x(v.y)), store_x(C_x(v.z)), store_x(C_x(v.w)));
}
