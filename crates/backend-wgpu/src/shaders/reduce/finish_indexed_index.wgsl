// The second pass of a split argmax or argmin.
// Partial results of a first pass, in the compute type, and their winners' indices.
@group(0) @binding(1) var<storage, read> x: array<C_x>;
@group(0) @binding(2) var<storage, read> xi: array<u32>;
fn load_(k: u32, j: u32) -> Acc { return Acc(x[k], xi[k]); }
// An i64 index: (low, high) words.
@group(0) @binding(3) var<storage, read_write> y: array<vec2<u32>>;
fn store_(o: u32, a: Acc) { y[o] = vec2<u32>(a.i, 0u); }
