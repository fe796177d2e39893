// The second pass of a split sum (or of a split-K matmul).
// Partial results of a first pass, in the compute type.
@group(0) @binding(1) var<storage, read> x: array<C_x>;
fn load_(k: u32, j: u32) -> Acc { return Acc(x[k], 0u); }
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;
fn store_(o: u32, a: Acc) { y[o] = store_x(a.v); }
