// y = op_(x) elementwise; `op_` comes from the op's file in unary/.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;

// Element i's operand, and its result stored (the entry point is elementwise4.wgsl's).
fn load_(i: u32) -> C_x { return load_x(x[offset_of(i, 0u)]); }
fn store_(i: u32, v: C_x) { y[i] = store_x(op_(v)); }
