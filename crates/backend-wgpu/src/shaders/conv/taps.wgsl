// Where the column matrix of the forward and input-gradient passes reads the gathered operand
// g (x for the forward, dy for the input gradient): rows k = (tap t, channel c) tap-major,
// columns j = (image, position). Shared by the loaders of the tiled kernel (gather.wgsl) and
// of the cooperative-matrix one (gather_coop.wgsl).
//
// params: [40] channels per group of g, [41] its channel stride, [42] its image stride,
// [43] / [44] its height and width, [45] / [46] the width and size of the column grid
// (out_w, out_h * out_w for the forward; W, H * W for the input gradient).
// TRANSPOSED: the input gradient, where tap (ky, kx) of position (iy, ix) reads dy at
// ((iy + p - ky d) / s, ..) when that divides evenly and lies inside (STRIDED), or, for one
// phase of a strided gradient (conv.rs) or stride 1, at (iy + p - ky d, ..) with that phase's
// taps, shift p (signed) and dilation d; else the forward, reading x at (oy s - p + ky d, ..)
// inside the padding.

// A column: whether it lies inside the matrix, its image's offset in g, and its position
// before the tap is applied (signed).
struct Col {
    ok: bool,
    img: u32,
    y: i32,
    x: i32,
}

fn column(j: u32) -> Col {
    let img = j / params[46];
    let r = j - img * params[46];
    let cy = r / params[45];
    let cx = r - cy * params[45];
    if (TRANSPOSED) {
        // The shift is signed (two's complement in a u32): the sum wraps to the right value.
        return Col(j < params[3], img * params[42], bitcast<i32>(cy + params[25]), bitcast<i32>(cx + params[26]));
    }
    return Col(j < params[3], img * params[42], i32(cy * params[23]) - i32(params[25]), i32(cx * params[24]) - i32(params[26]));
}

// Where tap (ky, kx) of column c reads in one channel of g, or -1 where it reads a zero
// (padding, or between the strided outputs).
fn tap_at(c: Col, ky: u32, kx: u32) -> i32 {
    if (!c.ok) { return -1; }
    if (TRANSPOSED) {
        let ty = c.y - i32(ky * params[27]);
        let tx = c.x - i32(kx * params[28]);
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
    let iy = c.y + i32(ky * params[27]);
    let ix = c.x + i32(kx * params[28]);
    if (iy < 0 || ix < 0 || iy >= i32(params[43]) || ix >= i32(params[44])) { return -1; }
    return iy * i32(params[44]) + ix;
}

fn tap_offset(c: Col, t: u32) -> i32 {
    let ky = t / params[22];
    return tap_at(c, ky, t - ky * params[22]);
}
