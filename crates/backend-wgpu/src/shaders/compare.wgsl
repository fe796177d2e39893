// out = (a OP b) as 0/1 over broadcast operands. `cmp_` comes from compare/float.wgsl,
// word.wgsl or i64.wgsl, which pick the comparison by the constant OP (0 eq, 1 ne, 2 lt, 3 le,
// 4 gt, 5 ge).

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    out[i] = select(0u, 1u, cmp_(lhs[offset_of(i, 0u)], rhs[offset_of(i, 1u)]));
}
