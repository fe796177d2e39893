// out = (a OP b) as 0/1 over broadcast operands; the comparison is substituted for {{EXPR}}.

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

// Signed 64-bit less-than on (low, high) word pairs.
fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    let a = {{LOAD}}(lhs[offset_of(i, 0u)]);
    let b = {{LOAD}}(rhs[offset_of(i, 1u)]);
    out[i] = select(0u, 1u, {{EXPR}});
}
