// y = op_(x) elementwise; `op_` comes from the op's file in unary/.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Elements first, first + 256, first + 512, first + 768 (see common.wgsl's first_of4).
    let first = first_of4(wid, nwg, lid);
    let n = params[0];
    if (first + 768u < n) {
        // Every load before any store: four of each operand in flight at once.
        let v0 = load_x(x[offset_of(first, 0u)]);
        let v1 = load_x(x[offset_of(first + 256u, 0u)]);
        let v2 = load_x(x[offset_of(first + 512u, 0u)]);
        let v3 = load_x(x[offset_of(first + 768u, 0u)]);
        y[first] = store_x(op_(v0));
        y[first + 256u] = store_x(op_(v1));
        y[first + 512u] = store_x(op_(v2));
        y[first + 768u] = store_x(op_(v3));
        return;
    }
    for (var i = first; i < n; i += 256u) {
        y[i] = store_x(op_(load_x(x[offset_of(i, 0u)])));
    }
}
