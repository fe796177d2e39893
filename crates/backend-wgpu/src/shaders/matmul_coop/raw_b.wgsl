// b's f16 values as stored, read through any strides (matmul/read_b.wgsl's binding).
fn raw_b(i: u32) -> f16 { return f16(b[i]); }
fn raw_b4(i: u32) -> vec4<f16> { return vec4<f16>(f16(b[i]), f16(b[i + 1u]), f16(b[i + 2u]), f16(b[i + 3u])); }
