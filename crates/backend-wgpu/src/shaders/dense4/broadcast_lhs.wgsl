// The broadcast operand is the lhs, the dense one the rhs (dense4/broadcast.wgsl).
@group(0) @binding(1) var<storage, read> bcast_: array<S_x>;
@group(0) @binding(2) var<storage, read> dense_: array<vec4<S_x>>;
fn apply_(d: C_x, b: C_x) -> C_x { return op_(b, d); }
