// y = the float view x rounded to bf16 and packed (packed/words.wgsl; the entry point is
// packed/entry2.wgsl's, which writes each word from one invocation).

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

fn value_(i: u32) -> f32 { return f32(load_x(x[offset_of(i, 0u)])); }

fn put_(w: u32, v: u32) { y[w] = v; }
