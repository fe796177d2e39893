// y = op_(x) on packed bf16 views (the entry point is packed/entry2.wgsl's).

@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

fn value_(i: u32) -> f32 {
    let e = offset_of(i, 0u);
    return op_(widen_(x[e >> 1u], e));
}

fn put_(w: u32, v: u32) { y[w] = v; }
