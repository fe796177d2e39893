// ops::GeluBackward on packed bf16 (`fused_gelu_backward.wgsl` one word at a time; the
// entry point is packed/entry2.wgsl's). `PointwiseParams`: p.numel = number of elements, p.offsets[0] and
// p.offsets[1] = the element offsets of x and dy.

@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read> dy: array<u32>;
@group(0) @binding(3) var<storage, read_write> dx: array<u32>;

fn value_(i: u32) -> f32 {
    let e = p.offsets[0] + i;
    let v = widen_(x[e >> 1u], e);
    let f = p.offsets[1] + i;
    // phi(v) = exp(-v^2 / 2) / sqrt(2 pi)
    let pdf = exp(-0.5 * v * v) * 0.39894228040143268;
    return widen_(dy[f >> 1u], f) * (normal_cdf(v) + v * pdf);
}

fn put_(w: u32, v: u32) { dx[w] = v; }
