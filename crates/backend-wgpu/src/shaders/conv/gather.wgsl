// b of the forward and input-gradient passes on the tiled kernel: the column matrix of
// conv/taps.wgsl. Each invocation loads one column of every slice (BN divides 256), so its
// column's image and position are worked out once per tile (begin_tile). ALIGNED: the
// channels per group are a multiple of BK, so a slice's rows share one tap and one bounds
// check.

var<private> col: Col;

fn begin_tile(m0: u32, n0: u32, lid: u32) {
    col = column(n0 + lid % BN);
}

fn b_one(base: u32, k: u32) -> C_x {
    if (k >= kend) { return C_x(0); }
    let t = k / p.g_channels;
    let at = tap_offset(col, t);
    if (at < 0) { return C_x(0); }
    return fetch_b(base + col.img + (k - t * p.g_channels) * p.g_channel_stride + u32(at));
}

// Slice rows kk, kk + st, kk + 2 st, kk + 3 st of this invocation's column (`edge` is not
// used: a column's taps are tested where it reaches into the padding anyway).
fn b_fetch(piece: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    let st = 256u / BN;
    let kk = lid / BN + piece * (1024u / BN);
    if (ALIGNED) {
        // k0 < kend, and K and every split are whole slices.
        let t = k0 / p.g_channels;
        let at = tap_offset(col, t);
        if (at < 0) { return vec4<C_x>(); }
        let cs = p.g_channel_stride;
        let i = base + col.img + (k0 - t * p.g_channels + kk) * cs + u32(at);
        return vec4<C_x>(fetch_b(i), fetch_b(i + st * cs), fetch_b(i + 2u * st * cs), fetch_b(i + 3u * st * cs));
    }
    let k = k0 + kk;
    return vec4<C_x>(b_one(base, k), b_one(base, k + st), b_one(base, k + 2u * st), b_one(base, k + 3u * st));
}

fn b_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let st = 256u / BN;
    let nn = lid % BN;
    let at = (lid / BN + piece * (1024u / BN)) * STR + nn / 4u;
    let c = nn % 4u;
    bs_[at][c] = x.x;
    bs_[at + st * STR][c] = x.y;
    bs_[at + 2u * st * STR][c] = x.z;
    bs_[at + 3u * st * STR][c] = x.w;
}
