// a's f16 values as stored, read through any strides (matmul/read_a.wgsl's binding).
fn raw_a(i: u32) -> f16 { return f16(a[i]); }
fn raw_a4(i: u32) -> vec4<f16> { return vec4<f16>(f16(a[i]), f16(a[i + 1u]), f16(a[i + 2u]), f16(a[i + 3u])); }
