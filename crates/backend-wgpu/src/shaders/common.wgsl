// Strided indexing over the parameter block `p` of the strided kernels (`StridedParams`,
// `kernels.rs`): p.numel elements, p.rank = R, p.dims = the shape (R words), then for each
// operand k its R strides and its offset, from R + k * (R + 1).

// Storage index of element `i` (row-major over the shape) of operand `k`.
fn offset_of(i: u32, k: u32) -> u32 {
    let rank = p.rank;
    let base = rank + k * (rank + 1u);
    // One dimension (what dense and scalar operands coalesce to): no division needed.
    if (rank == 1u) { return p.dims[base + 1u] + i * p.dims[base]; }
    var off = p.dims[base + rank];
    var rem = i;
    for (var d = i32(rank) - 1; d >= 0; d--) {
        let size = p.dims[u32(d)];
        off += (rem % size) * p.dims[base + u32(d)];
        rem = rem / size;
    }
    return off;
}
