// y = the float view x rounded to bf16 (to nearest even; a NaN stays a NaN), two elements to
// a word: one invocation writes word w whole, elements 2w (low half) and 2w + 1, so no two
// invocations share a word.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

// Element i's bf16 bits.
fn half_(i: u32) -> u32 {
    let v = f32(load_x(x[offset_of(i, 0u)]));
    let b = bitcast<u32>(store_b(v)) >> 16u;
    return select(b, b | 0x40u, !(v == v));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = params[0];
    let w = flat_id(wid, nwg, lid);
    if (w >= (n + 1u) / 2u) { return; }
    let i = 2u * w;
    var v = half_(i);
    if (i + 1u < n) {
        v |= half_(i + 1u) << 16u;
    }
    y[w] = v;
}
