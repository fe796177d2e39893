// A whole reduction (argmax, argmin) of x into indices y.
@group(0) @binding(1) var<storage, read> x: array<S_x>;
fn load_(k: u32, j: u32) -> Acc { return Acc(load_x(x[k]), j); }
// An i64 index: (low, high) words.
@group(0) @binding(2) var<storage, read_write> y: array<vec2<u32>>;
fn store_(o: u32, a: Acc) { y[o] = vec2<u32>(a.i, 0u); }
