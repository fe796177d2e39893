// x read as packed bf16 (two to a word, `packed.rs`), widened as it is read.
@group(0) @binding(1) var<storage, read> x: array<u32>;
fn load_(k: u32, j: u32) -> Acc {
    let w = x[k >> 1u];
    return Acc(bitcast<f32>(select(w << 16u, w & 0xffff0000u, (k & 1u) == 1u)), j);
}
