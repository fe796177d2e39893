// dst[view 1] = src[view 0] in vec4s: both views dense along their innermost dimension in runs
// of four, the strided block (`common.wgsl`) counted in fours, one vec4 an invocation.

@group(0) @binding(1) var<storage, read> src: array<vec4<S_x>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<S_x>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let j = flat_id(wid, nwg, lid);
    if (j < p.numel) {
        dst[offset_of(j, 1u)] = src[offset_of(j, 0u)];
    }
}
