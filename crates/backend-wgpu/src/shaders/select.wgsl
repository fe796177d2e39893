// out = cond ? on_true : on_false over broadcast operands; moves elements of any dtype.

@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> on_true: array<S_x>;
@group(0) @binding(3) var<storage, read> on_false: array<S_x>;
@group(0) @binding(4) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    out[i] = select(on_false[offset_of(i, 2u)], on_true[offset_of(i, 1u)], cond[offset_of(i, 0u)] != 0u);
}
