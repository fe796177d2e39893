// The operands' values (f32, or bf16 widened, as fetch_a / fetch_b read them) scaled and
// rounded to f16 (matmul_coop/scaled.wgsl).
fn raw_a(i: u32) -> f16 { return f16(fetch_a(i) * sa_); }
fn raw_a4(i: u32) -> vec4<f16> { return vec4<f16>(fetch_a4(i) * sa_); }
fn raw_b(i: u32) -> f16 { return f16(fetch_b(i) * sb_); }
fn raw_b4(i: u32) -> vec4<f16> { return vec4<f16>(fetch_b4(i) * sb_); }
