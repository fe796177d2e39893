// The columns n = (channel, ky, kx) of the weight-gradient pass's b (the transposed column
// matrix of x), shared by the tiled kernel's loader (weight_x.wgsl) and the cooperative-matrix
// one (weight_x_coop.wgsl).
//
// p.l = L (out_h * out_w), p.x_image_stride (C * H * W), p.x_channel_stride (H * W), p.taps =
// kh * kw.

// Column n's offset in an image of x (channel, and the tap's shift), and the tap's shift
// packed as ky * dh | (kx * dw) << 16 (all ones: past the last column).
fn tap_of(n: u32) -> vec2<u32> {
    if (n >= p.n) { return vec2<u32>(0u, 0xffffffffu); }
    let c = n / p.taps;
    let t = n - c * p.taps;
    let ky = t / p.kw;
    let kx = t - ky * p.kw;
    let dy = ky * p.dil_h;
    let dx = kx * p.dil_w;
    return vec2<u32>(c * p.x_channel_stride + dy * p.w + dx, dy | (dx << 16u));
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
    let img = k / p.l;
    let l = k - img * p.l;
    let oy = l / p.out_w;
    let ox = l - oy * p.out_w;
    let y0 = i32(oy * p.stride_h) - i32(p.pad_h);
    let x0 = i32(ox * p.stride_w) - i32(p.pad_w);
    return Origin(i32(base + img * p.x_image_stride) + y0 * i32(p.w) + x0, y0, x0);
}

// Where the element of column (at, yx) (tap_of's) at origin o lies in x, or -1 in the padding.
fn x_at(o: Origin, at: u32, yx: u32) -> i32 {
    let iy = o.y0 + i32(yx & 0xffffu);
    let ix = o.x0 + i32(yx >> 16u);
    if (iy < 0 || ix < 0 || iy >= i32(p.h) || ix >= i32(p.w)) { return -1; }
    return o.row + i32(at);
}
