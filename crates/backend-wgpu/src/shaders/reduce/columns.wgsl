// Sums down the columns of a contiguous [outer, len, inner] view (`ColumnParams`; `len` rows
// of `groups` vectors of four columns), into f32 [outer, chunks, inner]: chunk c of a lane
// summed alone, the whole lane where `chunks` is 1.
//
// A workgroup takes one chunk of rows and `width` neighbouring column groups: invocation lid
// reads group lid % width from every `lanes`-th row, so the workgroup reads whole rows, a
// vector an invocation (`load4_`, from a part before this file). The lanes' sums of a group
// then meet in workgroup memory.

@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;

var<workgroup> part: array<vec4<f32>, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    let tile = g % p.tiles;
    let chunk = (g / p.tiles) % p.chunks;
    let o = g / (p.tiles * p.chunks);
    let lane = lid / p.width;
    let c = tile * p.width + lid % p.width;
    let live = o < p.outer && lane < p.lanes && c < p.groups;
    var a = vec4<f32>(0.0);
    if (live) {
        let end = min(p.len, (chunk + 1u) * p.chunk_rows);
        let step = p.lanes * p.groups;
        var r = chunk * p.chunk_rows + lane;
        var k = p.offset + (o * p.len + r) * p.groups + c;
        // Four loads in flight, then folded.
        for (; r + 3u * p.lanes < end; r += 4u * p.lanes) {
            let v0 = load4_(k);
            let v1 = load4_(k + step);
            let v2 = load4_(k + 2u * step);
            let v3 = load4_(k + 3u * step);
            a += (v0 + v1) + (v2 + v3);
            k += 4u * step;
        }
        for (; r < end; r += p.lanes) {
            a += load4_(k);
            k += step;
        }
    }
    part[lid] = a;
    workgroupBarrier();
    // Lane l adds lane l + s while that lane exists: a tree over any count of lanes.
    for (var s = p.half; s > 0u; s >>= 1u) {
        if (live && lane < s && lane + s < p.lanes) {
            a += part[lid + s * p.width];
            part[lid] = a;
        }
        workgroupBarrier();
    }
    if (live && lane == 0u) {
        y[(o * p.chunks + chunk) * p.groups + c] = a;
    }
}
