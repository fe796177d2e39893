// y[i] = the value in params[1..4] (f32 bits; two words for i64; three f32 parts summing to
// an f64), converted by {{VALUE}}.

@group(0) @binding(1) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    y[i] = {{VALUE}};
}
