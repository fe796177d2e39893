// The output's chunk at element k from the first CHUNK lanes of v, rounded to the dtype.
fn write_chunk_(k: u32, v: vec4<f32>) { out_[k] = store_x(C_x(v.x)); }
