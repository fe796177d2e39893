// Sums x [N, C, L] over N and L (`ChannelParams`; a convolution's bias gradient): workgroup
// (c, j) sums chunk j of channel c's N runs of L (flattened, `chunk_len` elements a chunk;
// `load_`, from a part before this file, reads one element or a word of two packed ones),
// four loads in flight an invocation, the sums then meeting in a tree in workgroup memory. Out:
// y [C] where the channel is one chunk, else the chunks' f32 partial sums [chunks, C].

@group(0) @binding(2) var<storage, read_write> y: array<S_y>;

var<workgroup> part: array<f32, 256>;

fn at_(i: u32, ch: u32) -> u32 {
    let s = i / p.l;
    return p.offset + (s * p.c + ch) * p.l + (i - s * p.l);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    let ch = g / p.chunks;
    let j = g % p.chunks;
    var a = 0.0;
    if (ch < p.c) {
        let end = min(p.n * p.l, (j + 1u) * p.chunk_len);
        var i = j * p.chunk_len + lid;
        for (; i + 768u < end; i += 1024u) {
            let v0 = load_(at_(i, ch));
            let v1 = load_(at_(i + 256u, ch));
            let v2 = load_(at_(i + 512u, ch));
            let v3 = load_(at_(i + 768u, ch));
            a += (v0 + v1) + (v2 + v3);
        }
        for (; i < end; i += 256u) {
            a += load_(at_(i, ch));
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
        y[j * p.c + ch] = store_y(part[0]);
    }
}
