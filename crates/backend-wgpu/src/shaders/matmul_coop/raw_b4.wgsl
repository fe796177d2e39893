// b's f16 values as stored, read in aligned vec4s (matmul/read_b4.wgsl's binding).
fn raw_b(i: u32) -> f16 { return f16(b[i / 4u][i % 4u]); }
fn raw_b4(i: u32) -> vec4<f16> { return vec4<f16>(b[i / 4u]); }
