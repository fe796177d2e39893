// The rows of a summed over the tile's K range beside the product (ops::LinearGrads: a linear
// layer's bias gradient, the rows of dy^T, from the slices its weight gradient dy^T x fetches).
// a is read along M (A_LOAD Outer, checked on the host), so an invocation fetches the same four
// rows, lid % (BM / 4), in every slice: it sums the vec4s it fetched (one add a vec4, where the
// products take 16 a slice), and after the last slice the invocations of each four rows meet in
// as_. The tiles of the first column store them.
@group(0) @binding(4) var<storage, read_write> rows_: array<C_x>;

var<private> rsum_: vec4<C_x>;

fn rows_clear() {
    rsum_ = vec4<C_x>();
}

fn rows_add(s: Slice) {
    rsum_ += s.a0;
    if (PV == 2u) { rsum_ += s.a1; }
}

// One product a batch (checked on the host): split s's y starts at s * M * N, its row sums
// at s * M. Every invocation calls it (its barriers).
fn rows_store(ybase: u32, m0: u32, n0: u32, lid: u32) {
    let groups = BM / 4u;
    workgroupBarrier();
    as_[lid] = rsum_;
    workgroupBarrier();
    if (n0 == 0u && lid < groups) {
        var s = as_[lid];
        for (var j = 1u; j < WG / groups; j++) { s += as_[lid + j * groups]; }
        let base = (ybase / (p.m * p.n)) * p.m;
        let m = m0 + lid * 4u;
        for (var q = 0u; q < 4u; q++) {
            if (m + q < p.m) { rows_[base + m + q] = s[q]; }
        }
    }
}
