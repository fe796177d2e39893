// a of the weight-gradient pass: dy of one group as an O/G x (N * L) matrix, rows the output
// channels, k = (image, position). A4: L is a multiple of 4 and dy's offset too, so four
// consecutive k are one aligned vec4 of one image.
//
// p.l = L (out_h * out_w), p.dy_image_stride (O * L).

fn a_one(i: u32, m: u32) -> C_x {
    if (m < p.m) { return fetch_a(i + m * p.l); }
    return C_x(0);
}

fn a_fetch(piece: u32, lid: u32, base: u32, m0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    if (A4) {
        let v = lid + 256u * piece;
        let m = m0 + v / 4u;
        let k = k0 + (v % 4u) * 4u;
        if (edge && (m >= p.m || k >= kend)) { return vec4<C_x>(); }
        let img = k / p.l;
        return fetch_a4(base + img * p.dy_image_stride + m * p.l + (k - img * p.l));
    }
    // Scalars: each invocation reads one k (neighbours read neighbouring positions) of rows
    // lid / 16 + 16 j + 64 piece.
    let k = k0 + lid % 16u;
    if (edge && k >= kend) { return vec4<C_x>(); }
    let img = k / p.l;
    let i = base + img * p.dy_image_stride + (k - img * p.l);
    let m = m0 + lid / 16u + 64u * piece;
    return vec4<C_x>(a_one(i, m), a_one(i, m + 16u), a_one(i, m + 32u), a_one(i, m + 48u));
}

fn a_put(piece: u32, lid: u32, x: vec4<C_x>) {
    if (A4) {
        let v = lid + 256u * piece;
        let mm = v / 4u;
        let at = (v % 4u) * 4u * STR + mm / 4u;
        let c = mm % 4u;
        as_[at][c] = x.x;
        as_[at + STR][c] = x.y;
        as_[at + 2u * STR][c] = x.z;
        as_[at + 3u * STR][c] = x.w;
    } else {
        let mm = lid / 16u + 64u * piece;
        let at = (lid % 16u) * STR + mm / 4u;
        let c = mm % 4u;
        as_[at][c] = x.x;
        as_[at + 4u][c] = x.y;
        as_[at + 8u][c] = x.z;
        as_[at + 12u][c] = x.w;
    }
}
