// Winograd F(4x4, 3x3), the data transform: each 6 x 6 patch d of x (a 4 x 4 output tile's
// window, 4 apart, the padding read as zeros) becomes V = B^T d B, stored as 36 matrices
// [C, P] (element (r, s) in matrix 6 r + s, P = N * tiles): the b operands of the products.
//
// `WinogradPatch` (`conv/winograd.rs`): p.invocations = C * P, p.patches = P,
// p.tiles per image, p.tiles_w per row (the tiles of the
// output), p.h, p.w (x's), p.offset (x's), p.channels = C, p.pad (rows and columns of zeros
// around x).

@group(0) @binding(1) var<storage, read> x: array<A_t>;
@group(0) @binding(2) var<storage, read_write> dst: array<S_x>;

// x at (y, xx) of the plane at base; zero outside it.
fn x_at(base: u32, y: i32, xx: i32) -> C_x {
    if (y < 0 || xx < 0 || y >= i32(p.h) || xx >= i32(p.w)) { return C_x(0); }
    let e = base + u32(y) * p.w + u32(xx);
    return read_t(x[e >> SHIFT_T], e);
}

// Row y of the patch at column x0: its columns 0-3, and 4-5 (in .xy).
fn lo(base: u32, y: i32, x0: i32) -> vec4<C_x> {
    return vec4<C_x>(x_at(base, y, x0), x_at(base, y, x0 + 1), x_at(base, y, x0 + 2), x_at(base, y, x0 + 3));
}

fn hi(base: u32, y: i32, x0: i32) -> vec4<C_x> {
    return vec4<C_x>(x_at(base, y, x0 + 4), x_at(base, y, x0 + 5), C_x(0), C_x(0));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let at = tile_at(i);
    let base = p.offset + (at.img * p.channels + at.row) * p.h * p.w;
    let y0 = i32(4u * at.ty) - i32(p.pad);
    let x0 = i32(4u * at.tx) - i32(p.pad);
    // B^T down the columns (four at a time), then along each row (four rows at a time).
    let l = data_t(Six(lo(base, y0, x0), lo(base, y0 + 1, x0), lo(base, y0 + 2, x0), lo(base, y0 + 3, x0), lo(base, y0 + 4, x0), lo(base, y0 + 5, x0)));
    let h = data_t(Six(hi(base, y0, x0), hi(base, y0 + 1, x0), hi(base, y0 + 2, x0), hi(base, y0 + 3, x0), hi(base, y0 + 4, x0), hi(base, y0 + 5, x0)));
    let z = vec4<C_x>();
    put(i, 0u, 4u, data_t(cols(l.v0, l.v1, l.v2, l.v3, h.v0, h.v1, h.v2, h.v3)));
    put(i, 4u, 2u, data_t(cols(l.v4, l.v5, z, z, h.v4, h.v5, z, z)));
}
