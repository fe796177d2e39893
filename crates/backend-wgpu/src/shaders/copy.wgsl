// dst[view 1] = src[view 0]: materializes a strided view, or writes one part of a concat.

@group(0) @binding(1) var<storage, read> src: array<S_x>;
@group(0) @binding(2) var<storage, read_write> dst: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Elements first, first + 256, first + 512, first + 768 (see common.wgsl's first_of4).
    let first = first_of4(wid, nwg, lid);
    let n = params[0];
    if (first + 768u < n) {
        // Every load before any store: four of each operand in flight at once.
        let v0 = src[offset_of(first, 0u)];
        let v1 = src[offset_of(first + 256u, 0u)];
        let v2 = src[offset_of(first + 512u, 0u)];
        let v3 = src[offset_of(first + 768u, 0u)];
        dst[offset_of(first, 1u)] = v0;
        dst[offset_of(first + 256u, 1u)] = v1;
        dst[offset_of(first + 512u, 1u)] = v2;
        dst[offset_of(first + 768u, 1u)] = v3;
        return;
    }
    for (var i = first; i < n; i += 256u) {
        dst[offset_of(i, 1u)] = src[offset_of(i, 0u)];
    }
}
