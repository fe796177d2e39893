// x as packed bf16 (A_x = u32), two values (a word) a chunk: L and the segments' bounds are
// even (`fused_norm.rs`), so a pair j, j + 1 of one segment is a pair i, i + 1 of one word.
const CHUNK: u32 = 2u;
fn x_chunk_(k: u32) -> vec4<f32> {
  let w = x[k >> 1u];
  return vec4<f32>(widen_(w, 0u), widen_(w, 1u), 0.0, 0.0);
}
