// DIRECT is off (f32 operands scaled into f16 as they are staged, matmul_coop/scaled.wgsl):
// glob_a and glob_b are never called.
fn glob_a(base: u32, m: u32, k: u32) -> coop_mat16x16<f16, A> { return coop_mat16x16<f16, A>(); }
fn glob_b(base: u32, n: u32, k: u32) -> coop_mat16x16<f16, B> { return coop_mat16x16<f16, B>(); }
