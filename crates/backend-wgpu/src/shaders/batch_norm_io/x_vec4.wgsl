// x as stored, four values a chunk (A_x = vec4<S_x>): L and x's offset are multiples of four
// (`fused_norm.rs`), so four neighbours j of a channel are four neighbours i of one row.
const CHUNK: u32 = 4u;
fn x_chunk_(k: u32) -> vec4<f32> {
  let v = x[k >> 2u];
  return vec4<f32>(f32(load_x(v.x)), f32(load_x(v.y)), f32(load_x(v.z)), f32(load_x(v.w)));
}
