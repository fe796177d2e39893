// The rows of a summed over the tile's K range beside the product (ops::LinearGrads: a linear
// layer's bias gradient, the rows of dy^T, from the slices its weight gradient dy^T x stages).
// Every invocation sums the rows of the staged a it reads (rows ty * 4 .. + 3, and 64 on with
// H = 2); those of the first column of tiles store them, a value a row, at the split's place.
@group(0) @binding(4) var<storage, read_write> rows_: array<C_x>;

var<private> rsum0_: vec4<C_x>;
var<private> rsum1_: vec4<C_x>;

fn rows_clear() {
    rsum0_ = vec4<C_x>();
    rsum1_ = vec4<C_x>();
}

fn rows_add0(v: vec4<C_x>) { rsum0_ += v; }
fn rows_add1(v: vec4<C_x>) { rsum1_ += v; }

fn rows_put(base: u32, m: u32, v: vec4<C_x>) {
    for (var q = 0u; q < 4u; q++) {
        if (m + q < p.m) { rows_[base + m + q] = v[q]; }
    }
}

// One product a batch (checked on the host): split s's y starts at s * M * N, its row sums
// at s * M.
fn rows_store(ybase: u32, m0: u32, n0: u32, tx: u32, ty: u32) {
    if (n0 != 0u || tx != 0u) { return; }
    let base = (ybase / (p.m * p.n)) * p.m;
    rows_put(base, m0 + ty * 4u, rsum0_);
    if (H == 2u) { rows_put(base, m0 + 64u + ty * 4u, rsum1_); }
}
