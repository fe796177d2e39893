// x read as stored (the first pass's input).
@group(0) @binding(1) var<storage, read> x: array<S_x>;
fn load_(k: u32, j: u32) -> Acc { return Acc(load_x(x[k]), j); }
