// ops::AddRelu on packed bf16 (`fused_add_relu.wgsl` one word at a time; the entry point is
// packed/entry2.wgsl's). The sum is rounded once, as it is stored: rounding keeps a value's
// sign, so the ReLU of the rounded sum is the rounded ReLU. `PointwiseParams`: p.numel =
// number of elements, p.offsets = a's and b's element offsets.

@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;

fn value_(i: u32) -> f32 {
    let ea = p.offsets[0] + i;
    let eb = p.offsets[1] + i;
    let s = widen_(a[ea >> 1u], ea) + widen_(b[eb >> 1u], eb);
    return select(0.0, s, s > 0.0);
}

fn put_(w: u32, v: u32) { y[w] = v; }
