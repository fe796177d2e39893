// The rows of a summed in f32 beside the product (a wide ops::LinearGrads: a linear layer's
// bias gradient, the rows of dy^T, from the slices its weight gradient dy^T x stages). a is
// read in vec4s along M (LOAD_OUTER, checked on the host), so each vec4 an invocation fetches
// holds the same four rows, (lid % (BM / 4)) * 4 .. + 3, at another depth: it sums them as it
// stages them, and the invocations of the same rows meet in the scratch at the tile's end.
@group(0) @binding(4) var<storage, read_write> rows_: array<f32>;

var<private> rsum_: vec4<f32>;

fn rows_clear() { rsum_ = vec4<f32>(); }
fn rows_add(x: vec4<f16>) { rsum_ += vec4<f32>(x); }

// Every invocation calls it at the same point (barriers). One product a batch (checked on
// the host): split s's y starts at s * M * N, its row sums at s * M; the first column of tiles
// stores them.
fn rows_store(ybase: u32, m0: u32, n0: u32, lid: u32) {
    workgroupBarrier();
    cs_[lid * 4u] = rsum_.x;
    cs_[lid * 4u + 1u] = rsum_.y;
    cs_[lid * 4u + 2u] = rsum_.z;
    cs_[lid * 4u + 3u] = rsum_.w;
    workgroupBarrier();
    if (n0 == 0u && lid < BM / 4u) {
        var s = vec4<f32>();
        for (var j = lid; j < WG; j += BM / 4u) {
            s += vec4<f32>(cs_[j * 4u], cs_[j * 4u + 1u], cs_[j * 4u + 2u], cs_[j * 4u + 3u]);
        }
        let base = (ybase / (p.m * p.n)) * p.m;
        let m = m0 + lid * 4u;
        for (var q = 0u; q < 4u; q++) {
            if (m + q < p.m) { rows_[base + m + q] = s[q]; }
        }
    }
    workgroupBarrier();
}
