// out = op_(a, b) on 64-bit two's-complement integers held as vec2<u32> (low word, high
// word), wrapping as PyTorch's int64 does; `op_` is binary/add_i64.wgsl or sub_i64.wgsl.
// (BatchNorm's `num_batches_tracked += 1` is the one i64 arithmetic a training step does;
// without this it went to the CPU every step.)

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<S_x>;

// Element i's operands, and its result stored (the entry point is elementwise4.wgsl's).
struct In_ { a: S_x, b: S_x }
fn load_(i: u32) -> In_ { return In_(lhs[offset_of(i, 0u)], rhs[offset_of(i, 1u)]); }
fn store_(i: u32, v: In_) { out[i] = op_(v.a, v.b); }
