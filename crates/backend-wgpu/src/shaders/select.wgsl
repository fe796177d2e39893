// out = cond ? on_true : on_false over broadcast operands; moves elements of any dtype.

@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> on_true: array<S_x>;
@group(0) @binding(3) var<storage, read> on_false: array<S_x>;
@group(0) @binding(4) var<storage, read_write> out: array<S_x>;

// Element i's operands, and its result stored (the entry point is elementwise4.wgsl's).
struct In_ { c: u32, t: S_x, f: S_x }
fn load_(i: u32) -> In_ { return In_(cond[offset_of(i, 0u)], on_true[offset_of(i, 1u)], on_false[offset_of(i, 2u)]); }
fn store_(i: u32, v: In_) { out[i] = select(v.f, v.t, v.c != 0u); }
