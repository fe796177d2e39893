// The largest finite magnitudes of a scaled product's two operands (matmul_coop/scaled.wgsl),
// as f32 bits: a's (p.a_count words from p.a_start) into y[0] by the grid's first row of
// workgroups, b's into y[1] by its second, by atomicMax (the caller clears y first). With the
// sign cleared, f32 bits order as the values do; a word of packed bf16 (PACKED) holds two
// values whose bits are the high halves of their f32 ones. Infinities and NaNs are left out:
// they stay what they are under any scale, and the finite values beside them keep theirs.
// Each invocation walks the words a grid apart; the workgroup's largest goes out from a tree
// in workgroup memory.
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<atomic<u32>>;

var<workgroup> tree: array<u32, 256>;

// m, or the magnitude of a finite value of word w where it is larger.
fn max_word(m: u32, w: u32) -> u32 {
    var out = m;
    var v = w & 0x7fffffffu;
    if (PACKED) {
        v = w & 0x7fff0000u;
        let low = (w << 16u) & 0x7fff0000u;
        if (low < 0x7f800000u) { out = max(out, low); }
    }
    if (v < 0x7f800000u) { out = max(out, v); }
    return out;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let step = nwg.x * 256u;
    var m = 0u;
    if (wid.y == 0u) {
        for (var i = wid.x * 256u + lid; i < p.a_count; i += step) { m = max_word(m, a[p.a_start + i]); }
    } else {
        for (var i = wid.x * 256u + lid; i < p.b_count; i += step) { m = max_word(m, b[p.b_start + i]); }
    }
    tree[lid] = m;
    for (var s = 128u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if (lid < s) { tree[lid] = max(tree[lid], tree[lid + s]); }
    }
    if (lid == 0u) { atomicMax(&y[wid.y], tree[0]); }
}
