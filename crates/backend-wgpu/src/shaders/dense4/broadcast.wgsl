// out = op_(a, b) where one operand is dense and the other repeats one value per channel:
// element i reads the broadcast operand at (i / I) % C, a bias over rows (I = 1, C = the row
// length), over channels of [N, C, I] planes, over the rows of a column (I = the row length),
// or a scalar (C = 1). The dense operand and the result are read and written in vec4s; where
// I is a multiple of 4 a vec4's four elements share one broadcast value. Bindings and
// apply_(dense, broadcast) come from dense4/broadcast_lhs.wgsl or broadcast_rhs.wgsl.
//
// `BroadcastParams`: p.dense_offset is a multiple of 4, p.inner is I, p.channels is C.

@group(0) @binding(3) var<storage, read_write> out: array<vec4<S_x>>;

fn bcast_at(i: u32) -> C_x {
    return load_x(bcast_[p.bcast_offset + (i / p.inner) % p.channels]);
}

fn run4_(j: u32) {
    let a = dense_[p.dense_offset / 4u + j];
    let i = 4u * j;
    var b: vec4<C_x>;
    if (p.inner % 4u == 0u) {
        b = vec4<C_x>(bcast_at(i));
    } else {
        b = vec4<C_x>(bcast_at(i), bcast_at(i + 1u), bcast_at(i + 2u), bcast_at(i + 3u));
    }
    out[j] = vec4<S_x>(
        store_x(apply_(load_x(a.x), b.x)),
        store_x(apply_(load_x(a.y), b.y)),
        store_x(apply_(load_x(a.z), b.z)),
        store_x(apply_(load_x(a.w), b.w)),
    );
}
