// Sums x [N, C, L] over N and L into y [C] (`ChannelParams`; a bias gradient of a
// convolution): a workgroup a channel, its invocations striding over the channel's N runs of L
// (`load_`, from a part before this file, reads one element or a word of two packed ones),
// their sums then meeting in a tree in workgroup memory.

@group(0) @binding(2) var<storage, read_write> y: array<S_y>;

var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let ch = wid.y * nwg.x + wid.x;
    var a = 0.0;
    if (ch < p.c) {
        let total = p.n * p.l;
        for (var i = lid; i < total; i += 256u) {
            let s = i / p.l;
            a += load_(p.offset + (s * p.c + ch) * p.l + (i - s * p.l));
        }
    }
    part[lid] = a;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) {
            part[lid] += part[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u && ch < p.c) {
        y[ch] = store_y(part[0]);
    }
}
