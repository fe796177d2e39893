// x read as packed bf16 (packed/words.wgsl), widened as it is read.
@group(0) @binding(1) var<storage, read> x: array<u32>;
fn load_(k: u32, j: u32) -> Acc { return Acc(widen_(x[k >> 1u], k), j); }
