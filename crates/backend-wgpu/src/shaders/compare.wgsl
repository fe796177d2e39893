// out = (a OP b) as 0/1 over broadcast operands. `cmp_` comes from compare/float.wgsl,
// word.wgsl or i64.wgsl, which pick the comparison by the constant OP (0 eq, 1 ne, 2 lt, 3 le,
// 4 gt, 5 ge).

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Elements first, first + 256, first + 512, first + 768 (see common.wgsl's first_of4).
    let first = first_of4(wid, nwg, lid);
    let n = params[0];
    if (first + 768u < n) {
        // Every load before any store: four of each operand in flight at once.
        let a0 = lhs[offset_of(first, 0u)];
        let b0 = rhs[offset_of(first, 1u)];
        let a1 = lhs[offset_of(first + 256u, 0u)];
        let b1 = rhs[offset_of(first + 256u, 1u)];
        let a2 = lhs[offset_of(first + 512u, 0u)];
        let b2 = rhs[offset_of(first + 512u, 1u)];
        let a3 = lhs[offset_of(first + 768u, 0u)];
        let b3 = rhs[offset_of(first + 768u, 1u)];
        out[first] = select(0u, 1u, cmp_(a0, b0));
        out[first + 256u] = select(0u, 1u, cmp_(a1, b1));
        out[first + 512u] = select(0u, 1u, cmp_(a2, b2));
        out[first + 768u] = select(0u, 1u, cmp_(a3, b3));
        return;
    }
    for (var i = first; i < n; i += 256u) {
        out[i] = select(0u, 1u, cmp_(lhs[offset_of(i, 0u)], rhs[offset_of(i, 1u)]));
    }
}
