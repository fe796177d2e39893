// dst[view 1] = src[view 0]: materializes a strided view, or writes one part of a concat.

@group(0) @binding(1) var<storage, read> src: array<S_x>;
@group(0) @binding(2) var<storage, read_write> dst: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    dst[offset_of(i, 1u)] = src[offset_of(i, 0u)];
}
