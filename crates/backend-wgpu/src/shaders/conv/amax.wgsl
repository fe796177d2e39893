// The largest finite magnitude among p.count f32 values of x from p.start, as its f32 bits,
// into y[p.slot] by atomicMax (conv.rs clears y first). With the sign cleared, f32 bits
// order as the values do. Infinities and NaNs are left out: they stay what they are under any
// scale, and the finite values beside them keep theirs. Each invocation walks the values a
// grid apart; the workgroup's largest goes out from a tree in workgroup memory.
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<atomic<u32>>;

var<workgroup> tree: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let step = nwg.x * 256u;
    var m = 0u;
    for (var i = wid.x * 256u + lid; i < p.count; i += step) {
        let v = x[p.start + i] & 0x7fffffffu;
        if (v < 0x7f800000u) { m = max(m, v); }
    }
    tree[lid] = m;
    for (var s = 128u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if (lid < s) { tree[lid] = max(tree[lid], tree[lid + s]); }
    }
    if (lid == 0u) { atomicMax(&y[p.slot], tree[0]); }
}
