// The columns n = (channel, ky, kx) of the weight-gradient pass's b (the transposed column
// matrix of x), shared by the tiled kernel's loader (weight_x.wgsl) and the cooperative-matrix
// one (weight_x_coop.wgsl).
//
// params: [47] L (out_h * out_w), [49] x's image stride (C * H * W), [50] its channel stride
// (H * W), [51] kh * kw.

// Column n's offset in an image of x (channel, and the tap's shift), and the tap's shift
// packed as ky * dh | (kx * dw) << 16 (all ones: past the last column).
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

// x at row k = (image, position) of the matrix, as the window origin (y0, x0) of that
// position and the offset of (y0, x0) in x from `base` (signed: the origin may lie in the
// padding).
struct Origin {
    row: i32,
    y0: i32,
    x0: i32,
}

fn origin(base: u32, k: u32) -> Origin {
    let img = k / params[47];
    let l = k - img * params[47];
    let oy = l / params[30];
    let ox = l - oy * params[30];
    let y0 = i32(oy * params[23]) - i32(params[25]);
    let x0 = i32(ox * params[24]) - i32(params[26]);
    return Origin(i32(base + img * params[49]) + y0 * i32(params[19]) + x0, y0, x0);
}

// Where the element of column (at, yx) (tap_of's) at origin o lies in x, or -1 in the padding.
fn x_at(o: Origin, at: u32, yx: u32) -> i32 {
    let iy = o.y0 + i32(yx & 0xffffu);
    let ix = o.x0 + i32(yx >> 16u);
    if (iy < 0 || ix < 0 || iy >= i32(params[18]) || ix >= i32(params[19])) { return -1; }
    return o.row + i32(at);
}
