// b of the forward and input-gradient passes: the column matrix of the gathered operand g
// (x for the forward, dy for the input gradient), rows k = (tap t, channel c) tap-major,
// columns (image, position). Each invocation loads one column of every slice (BN divides 256),
// so its column's image and position are worked out once per tile (begin_tile).
//
// params: [40] channels per group of g, [41] its channel stride, [42] its image stride,
// [43] / [44] its height and width, [45] / [46] the width and size of the column grid
// (out_w, out_h * out_w for the forward; W, H * W for the input gradient).
// TRANSPOSED: the input gradient, where tap (ky, kx) of position (iy, ix) reads dy at
// ((iy + p - ky d) / s, ..) when that divides evenly and lies inside (STRIDED), or, for one
// phase of a strided gradient (conv.rs) or stride 1, at (iy + p - ky d, ..) with that phase's
// taps, shift p (signed) and dilation d; else the forward, reading x at (oy s - p + ky d, ..)
// inside the padding. ALIGNED: the channels per group are a multiple of BK, so a slice's rows
// share one tap and one bounds check.

var<private> col_ok: bool;
// The image's offset in g, and the column's position before the tap is applied (signed).
var<private> col_img: u32;
var<private> col_y: i32;
var<private> col_x: i32;

fn begin_tile(m0: u32, n0: u32, lid: u32) {
    let j = n0 + lid % BN;
    col_ok = j < params[3];
    let img = j / params[46];
    let r = j - img * params[46];
    let cy = r / params[45];
    let cx = r - cy * params[45];
    col_img = img * params[42];
    if (TRANSPOSED) {
        // The shift is signed (two's complement in a u32): the sum wraps to the right value.
        col_y = bitcast<i32>(cy + params[25]);
        col_x = bitcast<i32>(cx + params[26]);
    } else {
        col_y = i32(cy * params[23]) - i32(params[25]);
        col_x = i32(cx * params[24]) - i32(params[26]);
    }
}

// Where tap t of this invocation's column reads in one channel of g, or -1 where it reads a
// zero (padding, or between the strided outputs).
fn tap_offset(t: u32) -> i32 {
    let ky = t / params[22];
    let kx = t - ky * params[22];
    if (!col_ok) { return -1; }
    if (TRANSPOSED) {
        let ty = col_y - i32(ky * params[27]);
        let tx = col_x - i32(kx * params[28]);
        if (!STRIDED) {
            if (ty < 0 || tx < 0 || ty >= i32(params[43]) || tx >= i32(params[44])) { return -1; }
            return ty * i32(params[44]) + tx;
        }
        if (ty < 0 || tx < 0) { return -1; }
        let oy = u32(ty) / params[23];
        let ox = u32(tx) / params[24];
        if (oy * params[23] != u32(ty) || ox * params[24] != u32(tx) || oy >= params[43] || ox >= params[44]) { return -1; }
        return i32(oy * params[44] + ox);
    }
    let iy = col_y + i32(ky * params[27]);
    let ix = col_x + i32(kx * params[28]);
    if (iy < 0 || ix < 0 || iy >= i32(params[43]) || ix >= i32(params[44])) { return -1; }
    return iy * i32(params[44]) + ix;
}

fn b_one(base: u32, k: u32) -> C_x {
    if (k >= kend) { return C_x(0); }
    let t = k / params[40];
    let at = tap_offset(t);
    if (at < 0) { return C_x(0); }
    return fetch_b(base + col_img + (k - t * params[40]) * params[41] + u32(at));
}

// Slice rows kk, kk + st, kk + 2 st, kk + 3 st of this invocation's column.
fn b_fetch(p: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    let st = 256u / BN;
    let kk = lid / BN + p * (1024u / BN);
    if (ALIGNED) {
        // k0 < kend, and K and every split are whole slices.
        let t = k0 / params[40];
        let at = tap_offset(t);
        if (at < 0) { return vec4<C_x>(); }
        let cs = params[41];
        let i = base + col_img + (k0 - t * params[40] + kk) * cs + u32(at);
        return vec4<C_x>(fetch_b(i), fetch_b(i + st * cs), fetch_b(i + 2u * st * cs), fetch_b(i + 3u * st * cs));
    }
    let k = k0 + kk;
    return vec4<C_x>(b_one(base, k), b_one(base, k + st), b_one(base, k + 2u * st), b_one(base, k + 3u * st));
}

fn b_put(p: u32, lid: u32, x: vec4<C_x>) {
    let st = 256u / BN;
    let nn = lid % BN;
    let at = (lid / BN + p * (1024u / BN)) * STR + nn / 4u;
    let c = nn % 4u;
    bs_[at][c] = x.x;
    bs_[at + st * STR][c] = x.y;
    bs_[at + 2u * st * STR][c] = x.z;
    bs_[at + 3u * st * STR][c] = x.w;
}
