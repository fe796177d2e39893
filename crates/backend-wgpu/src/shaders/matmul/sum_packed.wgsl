// The finished y of a packed bf16 product whose K was split (matmul.rs): element i the sum of
// its p.splits partial sums (f32, p.numel apart), plus the bias of its column (i % p.n) where
// BIAS, rounded and packed a word an invocation by packed/entry2.wgsl.
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

fn value_(i: u32) -> f32 {
    var v = 0.0;
    for (var s = 0u; s < p.splits; s++) { v += partials[s * p.numel + i]; }
    if (BIAS) { v += bias_at(i % p.n); }
    return v;
}

fn put_(w: u32, v: u32) { y[w] = v; }
