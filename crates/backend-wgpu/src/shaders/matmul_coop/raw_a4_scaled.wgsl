// a's f32 values scaled and rounded to f16 (matmul_coop/scaled.wgsl), read in aligned vec4s.
fn raw_a(i: u32) -> f16 { return f16(a[i / 4u][i % 4u] * sa_); }
fn raw_a4(i: u32) -> vec4<f16> { return vec4<f16>(a[i / 4u] * sa_); }
