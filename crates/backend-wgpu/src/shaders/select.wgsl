// out = cond ? on_true : on_false over broadcast operands; moves elements of any dtype.

@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> on_true: array<S_x>;
@group(0) @binding(3) var<storage, read> on_false: array<S_x>;
@group(0) @binding(4) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Elements first, first + 256, first + 512, first + 768 (see common.wgsl's first_of4).
    let first = first_of4(wid, nwg, lid);
    let n = params[0];
    if (first + 768u < n) {
        // Every load before any store: four of each operand in flight at once.
        let c0 = cond[offset_of(first, 0u)];
        let t0 = on_true[offset_of(first, 1u)];
        let f0 = on_false[offset_of(first, 2u)];
        let c1 = cond[offset_of(first + 256u, 0u)];
        let t1 = on_true[offset_of(first + 256u, 1u)];
        let f1 = on_false[offset_of(first + 256u, 2u)];
        let c2 = cond[offset_of(first + 512u, 0u)];
        let t2 = on_true[offset_of(first + 512u, 1u)];
        let f2 = on_false[offset_of(first + 512u, 2u)];
        let c3 = cond[offset_of(first + 768u, 0u)];
        let t3 = on_true[offset_of(first + 768u, 1u)];
        let f3 = on_false[offset_of(first + 768u, 2u)];
        out[first] = select(f0, t0, c0 != 0u);
        out[first + 256u] = select(f1, t1, c1 != 0u);
        out[first + 512u] = select(f2, t2, c2 != 0u);
        out[first + 768u] = select(f3, t3, c3 != 0u);
        return;
    }
    for (var i = first; i < n; i += 256u) {
        out[i] = select(on_false[offset_of(i, 2u)], on_true[offset_of(i, 1u)], cond[offset_of(i, 0u)] != 0u);
    }
}
