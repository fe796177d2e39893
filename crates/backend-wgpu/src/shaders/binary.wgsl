// out = op_(a, b) elementwise over broadcast (stride-0) operands; `op_` comes from the op's
// file in binary/.

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    let a = load_x(lhs[offset_of(i, 0u)]);
    let b = load_x(rhs[offset_of(i, 1u)]);
    out[i] = store_x(op_(a, b));
}
