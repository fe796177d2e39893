// ops::Relu on packed bf16 (`fused_relu.wgsl` one word at a time; the entry point is
// packed/entry2.wgsl's; NaN gives 0 as there). `PointwiseParams`: p.numel = number of
// elements, p.offsets[0] = x's element offset.

@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

fn value_(i: u32) -> f32 {
    let e = p.offsets[0] + i;
    let v = widen_(x[e >> 1u], e);
    return select(0.0, v, v > 0.0);
}

fn put_(w: u32, v: u32) { y[w] = v; }
