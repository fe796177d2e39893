// A whole reduction (argmax, argmin) of x into indices y.
// An i64 index: (low, high) words.
@group(0) @binding(2) var<storage, read_write> y: array<vec2<u32>>;
fn store_(o: u32, a: Acc) { y[o] = vec2<u32>(a.i, 0u); }
