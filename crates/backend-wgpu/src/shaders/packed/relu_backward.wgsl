// ops::ReluBackward on packed bf16 (`fused_relu_backward.wgsl` one word at a time; the entry
// point is packed/entry2.wgsl's). `PointwiseParams`: p.numel = number of elements,
// p.offsets = the element offsets of y and dy.

@group(0) @binding(1) var<storage, read> y: array<u32>;
@group(0) @binding(2) var<storage, read> dy: array<u32>;
@group(0) @binding(3) var<storage, read_write> dx: array<u32>;

fn value_(i: u32) -> f32 {
    let e = p.offsets[0] + i;
    let f = p.offsets[1] + i;
    return select(0.0, widen_(dy[f >> 1u], f), widen_(y[e >> 1u], e) > 0.0);
}

fn put_(w: u32, v: u32) { dx[w] = v; }
