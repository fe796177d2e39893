// b of the weight-gradient pass: the transposed column matrix of x of one group, rows
// k = (image, position), columns n = (channel, ky, kx) as the weight is laid out. Each
// invocation loads one k of a slice (neighbours read neighbouring positions) and the same
// 4 * PV columns in every slice, whose taps (conv/weight_taps.wgsl) are worked out once per
// tile (begin_tile).

// tap_of of each column of this invocation.
var<private> tap_at0: vec4<u32>;
var<private> tap_at1: vec4<u32>;
var<private> tap_yx0: vec4<u32>;
var<private> tap_yx1: vec4<u32>;

fn begin_tile(m0: u32, n0: u32, lid: u32) {
    let n = n0 + lid / 16u;
    let t0 = tap_of(n);
    let t1 = tap_of(n + 16u);
    let t2 = tap_of(n + 32u);
    let t3 = tap_of(n + 48u);
    tap_at0 = vec4<u32>(t0.x, t1.x, t2.x, t3.x);
    tap_yx0 = vec4<u32>(t0.y, t1.y, t2.y, t3.y);
    if (PV == 2u) {
        let t4 = tap_of(n + 64u);
        let t5 = tap_of(n + 80u);
        let t6 = tap_of(n + 96u);
        let t7 = tap_of(n + 112u);
        tap_at1 = vec4<u32>(t4.x, t5.x, t6.x, t7.x);
        tap_yx1 = vec4<u32>(t4.y, t5.y, t6.y, t7.y);
    }
}

fn b_one(o: Origin, at: u32, yx: u32) -> C_x {
    let i = x_at(o, at, yx);
    if (i < 0) { return C_x(0); }
    return fetch_b(u32(i));
}

fn b_fetch(piece: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    let k = k0 + lid % 16u;
    if (edge && k >= kend) { return vec4<C_x>(); }
    let o = origin(base, k);
    var at = tap_at0;
    var yx = tap_yx0;
    if (piece == 1u) {
        at = tap_at1;
        yx = tap_yx1;
    }
    return vec4<C_x>(b_one(o, at.x, yx.x), b_one(o, at.y, yx.y), b_one(o, at.z, yx.z), b_one(o, at.w, yx.w));
}

fn b_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let nn = lid / 16u + 64u * piece;
    let at = (lid % 16u) * STR + nn / 4u;
    let c = nn % 4u;
    bs_[at][c] = x.x;
    bs_[at + 4u][c] = x.y;
    bs_[at + 8u][c] = x.z;
    bs_[at + 12u][c] = x.w;
}
