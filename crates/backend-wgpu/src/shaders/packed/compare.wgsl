// out = cmp_(lhs, rhs) on packed bf16 views into bool words, one element an invocation (the
// entry point is elementwise4.wgsl's: the output is whole words).

@group(0) @binding(1) var<storage, read> lhs: array<u32>;
@group(0) @binding(2) var<storage, read> rhs: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

struct In_ { a: f32, b: f32 }
fn load_(i: u32) -> In_ {
    let a = offset_of(i, 0u);
    let b = offset_of(i, 1u);
    return In_(widen_(lhs[a >> 1u], a), widen_(rhs[b >> 1u], b));
}
fn store_(i: u32, v: In_) { out[i] = select(0u, 1u, cmp_(v.a, v.b)); }
