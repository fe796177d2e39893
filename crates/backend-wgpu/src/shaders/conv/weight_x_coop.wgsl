// b of the weight-gradient pass on cooperative matrices: the transposed column matrix of x of
// conv/weight_taps.wgsl, fetched as matmul_coop.wgsl fetches an N-major b (B_LOAD is
// LOAD_OUTER): vec4 i of an invocation's share of a slice is four neighbouring columns of one
// row k = (image, position). WG is a multiple of BN / 4, so an invocation fetches the same four
// columns in every row it takes, and their taps are worked out once per tile (begin_tile).

var<private> wat: vec4<u32>;
var<private> wyx: vec4<u32>;

fn begin_tile(m0: u32, n0: u32, lid: u32) {
    let n = n0 + (lid % (BN / 4u)) * 4u;
    let t0 = tap_of(n);
    let t1 = tap_of(n + 1u);
    let t2 = tap_of(n + 2u);
    let t3 = tap_of(n + 3u);
    wat = vec4<u32>(t0.x, t1.x, t2.x, t3.x);
    wyx = vec4<u32>(t0.y, t1.y, t2.y, t3.y);
}

fn x_one(o: Origin, at: u32, yx: u32) -> f16 {
    let i = x_at(o, at, yx);
    if (i < 0) { return f16(0.0); }
    return raw_b(u32(i));
}

fn b_fetch(i: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<f16> {
    let k = k0 + (lid + WG * i) / (BN / 4u);
    if (edge && k >= kend) { return vec4<f16>(); }
    let o = origin(base, k);
    return vec4<f16>(x_one(o, wat.x, wyx.x), x_one(o, wat.y, wyx.y), x_one(o, wat.z, wyx.z), x_one(o, wat.w, wyx.w));
}
