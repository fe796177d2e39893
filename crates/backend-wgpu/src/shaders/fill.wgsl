// y[i] = value_(), the value carried in p.value; `value_` comes from fill/<kind>.wgsl.

@group(0) @binding(1) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.numel) { return; }
    y[i] = value_();
}
