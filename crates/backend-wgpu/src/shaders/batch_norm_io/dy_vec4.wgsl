// The chunk of dy at element k, as x's (batch_norm_io/x_vec4.wgsl).
fn dy_chunk_(k: u32) -> vec4<f32> {
  let v = dy[k >> 2u];
  return vec4<f32>(f32(load_x(v.x)), f32(load_x(v.y)), f32(load_x(v.z)), f32(load_x(v.w)));
}
