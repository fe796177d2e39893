// out = op_(a, b) elementwise over broadcast (stride-0) operands; `op_` comes from the op's
// file in binary/.

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Elements first, first + 256, first + 512, first + 768 (see common.wgsl's first_of4).
    let first = first_of4(wid, nwg, lid);
    let n = params[0];
    if (first + 768u < n) {
        // Every load before any store: four of each operand in flight at once.
        let a0 = load_x(lhs[offset_of(first, 0u)]);
        let b0 = load_x(rhs[offset_of(first, 1u)]);
        let a1 = load_x(lhs[offset_of(first + 256u, 0u)]);
        let b1 = load_x(rhs[offset_of(first + 256u, 1u)]);
        let a2 = load_x(lhs[offset_of(first + 512u, 0u)]);
        let b2 = load_x(rhs[offset_of(first + 512u, 1u)]);
        let a3 = load_x(lhs[offset_of(first + 768u, 0u)]);
        let b3 = load_x(rhs[offset_of(first + 768u, 1u)]);
        out[first] = store_x(op_(a0, b0));
        out[first + 256u] = store_x(op_(a1, b1));
        out[first + 512u] = store_x(op_(a2, b2));
        out[first + 768u] = store_x(op_(a3, b3));
        return;
    }
    for (var i = first; i < n; i += 256u) {
        out[i] = store_x(op_(load_x(lhs[offset_of(i, 0u)]), load_x(rhs[offset_of(i, 1u)])));
    }
}
