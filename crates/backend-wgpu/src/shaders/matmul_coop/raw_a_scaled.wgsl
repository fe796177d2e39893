// a's f32 values scaled and rounded to f16 (matmul_coop/scaled.wgsl), read through any strides.
fn raw_a(i: u32) -> f16 { return f16(a[i] * sa_); }
fn raw_a4(i: u32) -> vec4<f16> { return vec4<f16>(vec4<f32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]) * sa_); }
