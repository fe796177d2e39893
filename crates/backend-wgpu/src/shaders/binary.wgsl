// out = op_(a, b) elementwise over broadcast (stride-0) operands; `op_` comes from the op's
// file in binary/.

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<S_x>;

// Element i's operands, and its result stored (the entry point is elementwise4.wgsl's).
struct In_ { a: C_x, b: C_x }
fn load_(i: u32) -> In_ { return In_(load_x(lhs[offset_of(i, 0u)]), load_x(rhs[offset_of(i, 1u)])); }
fn store_(i: u32, v: In_) { out[i] = store_x(op_(v.a, v.b)); }
