// The packed bf16 bias of matmul/sum_packed.wgsl, one value a column.
@group(0) @binding(3) var<storage, read> bias_: array<u32>;
fn bias_at(n: u32) -> f32 {
    let j = p.bias_offset + n;
    return widen_(bias_[j >> 1u], j);
}
