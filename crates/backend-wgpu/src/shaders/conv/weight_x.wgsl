// b of the weight-gradient pass: the transposed column matrix of x of one group, rows
// k = (image, position), columns n = (channel, ky, kx) as the weight is laid out. Each
// invocation loads one k of a slice (neighbours read neighbouring positions) and the same
// 4 * PV columns in every slice, whose taps are worked out once per tile (begin_tile).
//
// params: [49] x's image stride (C * H * W), [50] its channel stride (H * W), [51] kh * kw.

// Per column of this invocation: its offset in an image of x (channel, and the tap's shift),
// and the tap's shift packed as ky * dh | (kx * dw) << 16 (all ones: past the last column).
var<private> tap_at0: vec4<u32>;
var<private> tap_at1: vec4<u32>;
var<private> tap_yx0: vec4<u32>;
var<private> tap_yx1: vec4<u32>;

fn tap_of(n: u32) -> vec2<u32> {
    if (n >= params[3]) { return vec2<u32>(0u, 0xffffffffu); }
    let c = n / params[51];
    let t = n - c * params[51];
    let ky = t / params[22];
    let kx = t - ky * params[22];
    let dy = ky * params[27];
    let dx = kx * params[28];
    return vec2<u32>(c * params[50] + dy * params[19] + dx, dy | (dx << 16u));
}

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

// x at window origin (y0, x0) of the image at row, shifted by one column's tap.
fn b_one(row: i32, y0: i32, x0: i32, at: u32, yx: u32) -> C_x {
    let iy = y0 + i32(yx & 0xffffu);
    let ix = x0 + i32(yx >> 16u);
    if (iy < 0 || ix < 0 || iy >= i32(params[18]) || ix >= i32(params[19])) { return C_x(0); }
    return fetch_b(u32(row + i32(at)));
}

fn b_fetch(p: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    let k = k0 + lid % 16u;
    if (k >= kend) { return vec4<C_x>(); }
    let img = k / params[47];
    let l = k - img * params[47];
    let oy = l / params[30];
    let ox = l - oy * params[30];
    let y0 = i32(oy * params[23]) - i32(params[25]);
    let x0 = i32(ox * params[24]) - i32(params[26]);
    let row = i32(base + img * params[49]) + y0 * i32(params[19]) + x0;
    var at = tap_at0;
    var yx = tap_yx0;
    if (p == 1u) {
        at = tap_at1;
        yx = tap_yx1;
    }
    return vec4<C_x>(b_one(row, y0, x0, at.x, yx.x), b_one(row, y0, x0, at.y, yx.y), b_one(row, y0, x0, at.z, yx.z), b_one(row, y0, x0, at.w, yx.w));
}

fn b_put(p: u32, lid: u32, x: vec4<C_x>) {
    let nn = lid / 16u + 64u * p;
    let at = (lid % 16u) * STR + nn / 4u;
    let c = nn % 4u;
    bs_[at][c] = x.x;
    bs_[at + 4u][c] = x.y;
    bs_[at + 8u][c] = x.z;
    bs_[at + 12u][c] = x.w;
}
