// A whole reduction (sum, max, min) of x into values y.
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;
fn store_(o: u32, a: Acc) { y[o] = store_x(a.v); }
