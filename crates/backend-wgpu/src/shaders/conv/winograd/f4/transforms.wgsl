// Winograd F(4x4, 3x3)'s transforms (Lavin and Gray, 2016), on 4 x 4 output tiles and 6 x 6
// patches, shared by the stage kernels of this folder. Each applies one 1-D transform to a set
// of rows held as vec4s (four columns, or four rows of a transposed set, at once), so a 2-D
// transform is the 1-D one, a transposition (`cols`), the 1-D one again, with every index a
// constant (arrays indexed in loops are spilled to memory by some drivers).
//
// B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
// 0 4 0 -5 0 1], G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
// 1/24 -1/12 1/6; 0 0 1], A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
// The weight gradient's F(3x3, 4x4) is their transpose: A on dy's tiles, G^T on the sums.

struct Six {
    v0: vec4<C_x>,
    v1: vec4<C_x>,
    v2: vec4<C_x>,
    v3: vec4<C_x>,
    v4: vec4<C_x>,
    v5: vec4<C_x>,
}

struct Four {
    v0: vec4<C_x>,
    v1: vec4<C_x>,
    v2: vec4<C_x>,
    v3: vec4<C_x>,
}

struct Three {
    v0: vec4<C_x>,
    v1: vec4<C_x>,
    v2: vec4<C_x>,
}

// B^T.
fn data_t(d: Six) -> Six {
    let four = C_x(4);
    let two = C_x(2);
    return Six(
        four * d.v0 - C_x(5) * d.v2 + d.v4,
        d.v3 + d.v4 - four * (d.v1 + d.v2),
        d.v4 - d.v3 + four * (d.v1 - d.v2),
        d.v4 - d.v2 + two * (d.v3 - d.v1),
        d.v4 - d.v2 + two * (d.v1 - d.v3),
        four * d.v1 - C_x(5) * d.v3 + d.v5,
    );
}

// G.
fn kernel_t(g: Three) -> Six {
    let s = C_x(1.0 / 6.0);
    let a = g.v0 / C_x(24) + g.v2 / C_x(6);
    let b = g.v1 / C_x(12);
    return Six(g.v0 / C_x(4), -s * (g.v0 + g.v1 + g.v2), -s * (g.v0 - g.v1 + g.v2), a + b, a - b, g.v2);
}

// A^T.
fn out_t(m: Six) -> Four {
    let p1 = m.v1 + m.v2;
    let n1 = m.v1 - m.v2;
    let p2 = m.v3 + m.v4;
    let n2 = m.v3 - m.v4;
    return Four(m.v0 + p1 + p2, n1 + C_x(2) * n2, p1 + C_x(4) * p2, n1 + C_x(8) * n2 + m.v5);
}

// A.
fn dy_t(e: Four) -> Six {
    let p1 = e.v0 + e.v2;
    let n1 = e.v1 + e.v3;
    let p2 = e.v0 + C_x(4) * e.v2;
    let n2 = C_x(2) * e.v1 + C_x(8) * e.v3;
    return Six(e.v0, p1 + n1, p1 - n1, p2 + n2, p2 - n2, e.v3);
}

// G^T.
fn grad_t(m: Six) -> Three {
    let s = C_x(1.0 / 6.0);
    let p1 = m.v1 + m.v2;
    let n1 = m.v2 - m.v1;
    let p2 = m.v3 + m.v4;
    let n2 = m.v3 - m.v4;
    return Three(m.v0 / C_x(4) - s * p1 + p2 / C_x(24), s * n1 + n2 / C_x(12), s * (p2 - p1) + m.v5);
}

// Six columns of four rows, from four rows of four columns (lo) and of two more (hi.xy): the
// transposition between a 2-D transform's two passes.
fn cols(l0: vec4<C_x>, l1: vec4<C_x>, l2: vec4<C_x>, l3: vec4<C_x>, h0: vec4<C_x>, h1: vec4<C_x>, h2: vec4<C_x>, h3: vec4<C_x>) -> Six {
    return Six(
        vec4<C_x>(l0.x, l1.x, l2.x, l3.x),
        vec4<C_x>(l0.y, l1.y, l2.y, l3.y),
        vec4<C_x>(l0.z, l1.z, l2.z, l3.z),
        vec4<C_x>(l0.w, l1.w, l2.w, l3.w),
        vec4<C_x>(h0.x, h1.x, h2.x, h3.x),
        vec4<C_x>(h0.y, h1.y, h2.y, h3.y),
    );
}
