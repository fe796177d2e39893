// Seeded random fill (`random_draw.wgsl`): element i of this launch is element p.first + i of
// the tensor (launches over huge tensors come in chunks).

@group(0) @binding(1) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let local = flat_id(wid, nwg, lid);
    if (local >= p.numel) { return; }
    y[local] = store_x(C_x(random_(local + p.first)));
}
