// The first pass of a split max, min, argmax or argmin: partial winners per chunk and their
// indices, in the compute type.
@group(0) @binding(2) var<storage, read_write> y: array<C_x>;
@group(0) @binding(3) var<storage, read_write> yi: array<u32>;
fn store_(o: u32, a: Acc) { y[o] = a.v; yi[o] = a.i; }
