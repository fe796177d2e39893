// a of the weight-gradient pass on cooperative matrices: dy of one group as an O/G x (N * L)
// matrix (weight_dy.wgsl's), fetched as matmul_coop.wgsl fetches a K-major a (A_LOAD is
// LOAD_K): vec4 i of an invocation's share of a slice is four consecutive k of one row. DY4:
// one aligned vec4 of one image (L and dy's offset are multiples of 4; conv.rs checks);
// otherwise four elements read alone, which may lie in two images.
//
// p.l = L (out_h * out_w), p.dy_image_stride (O * L).

fn a_fetch(i: u32, lid: u32, base: u32, m0: u32, k0: u32, edge: bool) -> vec4<f16> {
    let v = lid + WG * i;
    let m = m0 + v / (BK / 4u);
    let k = k0 + (v % (BK / 4u)) * 4u;
    if (edge && (m >= p.m || k >= kend)) { return vec4<f16>(); }
    if (DY4) {
        let img = k / p.l;
        return raw_a4(base + img * p.dy_image_stride + m * p.l + (k - img * p.l));
    }
    return vec4<f16>(dy_one(base, m, k, edge), dy_one(base, m, k + 1u, edge), dy_one(base, m, k + 2u, edge), dy_one(base, m, k + 3u, edge));
}

// dy of row m at column k (a zero at or past kend, which only an `edge` slice reaches).
fn dy_one(base: u32, m: u32, k: u32, edge: bool) -> f16 {
    if (edge && k >= kend) { return f16(0.0); }
    let img = k / p.l;
    return raw_a(base + img * p.dy_image_stride + m * p.l + (k - img * p.l));
}
