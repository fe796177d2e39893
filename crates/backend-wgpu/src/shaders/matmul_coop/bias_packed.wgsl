// A linear layer's bias as packed bf16, one value per column of y, added as matmul_coop's
// pairs are stored (write2_packed.wgsl); binding 5, after the scales' amax_.
@group(0) @binding(5) var<storage, read> bias_: array<u32>;
fn col_bias_(n: u32) -> f32 {
    let j = p.bias_offset + n;
    return widen_(bias_[j >> 1u], j);
}
