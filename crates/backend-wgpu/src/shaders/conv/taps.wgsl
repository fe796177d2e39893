// Where the column matrix of the forward and input-gradient passes reads the gathered operand
// g (x for the forward, dy for the input gradient): rows k = (tap t, channel c) tap-major,
// columns j = (image, position). Shared by the loaders of the tiled kernel (gather.wgsl) and
// of the cooperative-matrix one (gather_coop.wgsl).
//
// p.g_channels: channels per group of g, p.g_channel_stride, p.g_image_stride, p.g_h / p.g_w its
// height and width, p.cols_w / p.cols the width and size of the column grid
// (out_w, out_h * out_w for the forward; W, H * W for the input gradient).
// TRANSPOSED: the input gradient, where tap (ky, kx) of position (iy, ix) reads dy, for one
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
    let img = j / p.cols;
    let r = j - img * p.cols;
    let cy = r / p.cols_w;
    let cx = r - cy * p.cols_w;
    if (TRANSPOSED) {
        // The shift is signed (two's complement in a u32): the sum wraps to the right value.
        return Col(j < p.n, img * p.g_image_stride, bitcast<i32>(cy + p.pad_h), bitcast<i32>(cx + p.pad_w));
    }
    return Col(j < p.n, img * p.g_image_stride, i32(cy * p.stride_h) - i32(p.pad_h), i32(cx * p.stride_w) - i32(p.pad_w));
}

// Where tap (ky, kx) of column c reads in one channel of g, or -1 where it reads a zero
// (padding, or between the strided outputs).
fn tap_at(c: Col, ky: u32, kx: u32) -> i32 {
    if (!c.ok) { return -1; }
    if (TRANSPOSED) {
        let ty = c.y - i32(ky * p.dil_h);
        let tx = c.x - i32(kx * p.dil_w);
        if (ty < 0 || tx < 0 || ty >= i32(p.g_h) || tx >= i32(p.g_w)) { return -1; }
        return ty * i32(p.g_w) + tx;
    }
    let iy = c.y + i32(ky * p.dil_h);
    let ix = c.x + i32(kx * p.dil_w);
    if (iy < 0 || ix < 0 || iy >= i32(p.g_h) || ix >= i32(p.g_w)) { return -1; }
    return iy * i32(p.g_w) + ix;
}

fn tap_offset(c: Col, t: u32) -> i32 {
    let ky = t / p.kw;
    return tap_at(c, ky, t - ky * p.kw);
}
