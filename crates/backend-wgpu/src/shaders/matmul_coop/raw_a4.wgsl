// a's f16 values as stored, read in aligned vec4s (matmul/read_a4.wgsl's binding).
fn raw_a(i: u32) -> f16 { return f16(a[i / 4u][i % 4u]); }
fn raw_a4(i: u32) -> vec4<f16> { return vec4<f16>(a[i / 4u]); }
