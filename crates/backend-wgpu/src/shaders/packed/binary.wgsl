// out = op_(lhs, rhs) on packed bf16 views (the entry point is packed/entry2.wgsl's).

@group(0) @binding(1) var<storage, read> lhs: array<u32>;
@group(0) @binding(2) var<storage, read> rhs: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

fn value_(i: u32) -> f32 {
    let a = offset_of(i, 0u);
    let b = offset_of(i, 1u);
    return op_(widen_(lhs[a >> 1u], a), widen_(rhs[b >> 1u], b));
}

fn put_(w: u32, v: u32) { out[w] = v; }
