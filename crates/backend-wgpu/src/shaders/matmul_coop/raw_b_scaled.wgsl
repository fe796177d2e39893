// b's f32 values scaled and rounded to f16 (matmul_coop/scaled.wgsl), read through any strides.
fn raw_b(i: u32) -> f16 { return f16(b[i] * sb_); }
fn raw_b4(i: u32) -> vec4<f16> { return vec4<f16>(vec4<f32>(b[i], b[i + 1u], b[i + 2u], b[i + 3u]) * sb_); }
