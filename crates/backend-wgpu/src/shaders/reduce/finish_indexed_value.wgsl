// The second pass of a split max or min.
// Partial results of a first pass, in the compute type, and their winners' indices.
@group(0) @binding(1) var<storage, read> x: array<C_x>;
@group(0) @binding(2) var<storage, read> xi: array<u32>;
fn load_(k: u32, j: u32) -> Acc { return Acc(x[k], xi[k]); }
@group(0) @binding(3) var<storage, read_write> y: array<S_x>;
fn store_(o: u32, a: Acc) { y[o] = store_x(a.v); }
