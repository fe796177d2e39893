// The entry point of the elementwise kernels that read (unary, binary, compare, select, copy,
// cast): where the launch gives a grid for four, four elements an invocation, 256 apart
// (1,024 a workgroup, so every access of a warp stays coalesced), every load before any
// store, so that four of each operand are in flight at once. The kernel's file before this one defines `load_(i)`, element i's operands, and
// `store_(i, v)`, which computes and stores its result.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = p.numel;
    // A grid of an invocation per element (the launch's choice for strided reads, whose
    // loads gain nothing from four in flight): one each.
    if (nwg.x * nwg.y >= (n + 255u) / 256u) {
        let i = flat_id(wid, nwg, lid);
        if (i < n) {
            store_(i, load_(i));
        }
        return;
    }
    let first = (wid.y * nwg.x + wid.x) * 1024u + lid;
    if (first + 768u < n) {
        let v0 = load_(first);
        let v1 = load_(first + 256u);
        let v2 = load_(first + 512u);
        let v3 = load_(first + 768u);
        store_(first, v0);
        store_(first + 256u, v1);
        store_(first + 512u, v2);
        store_(first + 768u, v3);
        return;
    }
    for (var i = first; i < n; i += 256u) {
        store_(i, load_(i));
    }
}
