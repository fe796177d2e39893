// x as stored (A_x = S_x), a value a chunk.
const CHUNK: u32 = 1u;
// The chunk of x at element k: its values in the first CHUNK lanes, zeros after.
fn x_chunk_(k: u32) -> vec4<f32> { return vec4<f32>(f32(load_x(x[k])), 0.0, 0.0, 0.0); }
