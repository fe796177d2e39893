// dst[i] = element i of a packed bf16 view (packed/words.wgsl), as the f32 word the kernels
// compute on: bf16 is the top half of an f32, so this is exact. (The entry point is
// elementwise4.wgsl's.)

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

fn load_(i: u32) -> f32 {
    let e = offset_of(i, 0u);
    return widen_(src[e >> 1u], e);
}

fn store_(i: u32, v: f32) { dst[i] = v; }
