// The chunk of dy at element k, as x's (batch_norm_io/x_packed.wgsl).
fn dy_chunk_(k: u32) -> vec4<f32> {
  let w = dy[k >> 1u];
  return vec4<f32>(widen_(w, 0u), widen_(w, 1u), 0.0, 0.0);
}
