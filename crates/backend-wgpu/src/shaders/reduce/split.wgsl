// The first pass of a split sum: partial sums per chunk, kept in the compute type (never
// rounded to the dtype).
@group(0) @binding(2) var<storage, read_write> y: array<C_x>;
fn store_(o: u32, a: Acc) { y[o] = a.v; }
