// Shared by every kernel that reads the meta block as words: strided indexing over `params`
// (at most 64 u32s, declared just before this file as immediate data or a storage buffer;
// `Repr::params`).
//
// params[0] = number of elements (invocations that do work), params[1] = rank R, params[2..2+R] =
// shape, then for each operand k: R strides and an offset, at 2 + R + k * (R + 1).

// Storage index of element `i` (row-major over the shape) of operand `k`.
fn offset_of(i: u32, k: u32) -> u32 {
    let rank = params[1];
    let base = 2u + rank + k * (rank + 1u);
    // One dimension (what dense and scalar operands coalesce to): no division needed.
    if (rank == 1u) { return params[base + 1u] + i * params[base]; }
    var off = params[base + rank];
    var rem = i;
    for (var d = i32(rank) - 1; d >= 0; d--) {
        let size = params[2u + u32(d)];
        off += (rem % size) * params[base + u32(d)];
        rem = rem / size;
    }
    return off;
}
