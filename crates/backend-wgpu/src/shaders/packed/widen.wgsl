// dst[i] = element i of a bf16 view held two to a word (element 2w in the low half of word w),
// as the f32 word the kernels compute on: bf16 is the top half of an f32, so this is exact.
// (The entry point is elementwise4.wgsl's.)

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn load_(i: u32) -> u32 {
    let e = offset_of(i, 0u);
    let w = src[e >> 1u];
    return select(w << 16u, w & 0xffff0000u, (e & 1u) == 1u);
}

fn store_(i: u32, v: u32) { dst[i] = v; }
