// out = (a OP b) as 0/1 over broadcast operands. `cmp_` comes from compare/float.wgsl,
// word.wgsl or i64.wgsl, which pick the comparison by the constant OP (0 eq, 1 ne, 2 lt, 3 le,
// 4 gt, 5 ge).

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

// Element i's operands, and its result stored (the entry point is elementwise4.wgsl's).
struct In_ { a: S_x, b: S_x }
fn load_(i: u32) -> In_ { return In_(lhs[offset_of(i, 0u)], rhs[offset_of(i, 1u)]); }
fn store_(i: u32, v: In_) { out[i] = select(0u, 1u, cmp_(v.a, v.b)); }
