// No bias for matmul_coop's pairs of packed bf16 (write2_packed.wgsl).
fn col_bias_(n: u32) -> f32 { return 0.0; }
