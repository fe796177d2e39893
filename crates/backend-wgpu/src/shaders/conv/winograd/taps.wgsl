// The kernels the filter transforms (f2/weight.wgsl, f4/weight.wgsl) read: w [O, C, 3, 3] at
// p.offset, the product's M in p.m and K in p.k. The forward's product has
// M = O rows and K = C; the input gradient's (FLIP) M = C and K = O, with the kernel of
// (o = k, c = m) turned by 180 degrees (a stride-1 input gradient with padding 1 is the forward
// convolution of dy with those kernels).

@group(0) @binding(1) var<storage, read> w: array<A_t>;

// Tap (ky, kx) of the kernel of product row m, column k.
fn tap(m: u32, k: u32, ky: u32, kx: u32) -> C_x {
    var e = p.offset + (m * p.k + k) * 9u + ky * 3u + kx;
    if (FLIP) {
        e = p.offset + (k * p.m + m) * 9u + (2u - ky) * 3u + (2u - kx);
    }
    return read_t(w[e >> SHIFT_T], e);
}
