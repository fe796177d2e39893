// Winograd F(3x3, 4x4) for the weight gradient, the transform of dy: each 4 x 4 tile e of dy
// (zeros past the image's edge) becomes A e A^T, stored as 36 matrices [O, P] (element (r, s)
// in matrix 6 r + s): the a operands of the products whose b operands are input.wgsl's patches
// of x, transposed.
//
// `WinogradPatch` (`conv/winograd.rs`): p.invocations = O * P, p.patches = P,
// p.tiles per image, p.tiles_w per row, p.h,
// p.w (dy's: the output's), p.offset (dy's), p.channels = O.

@group(0) @binding(1) var<storage, read> dy: array<A_t>;
@group(0) @binding(2) var<storage, read_write> dst: array<S_x>;

// dy at (y, xx) of the plane at base; zero past its edge.
fn dy_at(base: u32, y: u32, xx: u32) -> C_x {
    if (y >= p.h || xx >= p.w) { return C_x(0); }
    let e = base + y * p.w + xx;
    return read_t(dy[e >> SHIFT_T], e);
}

fn tile_row(base: u32, y: u32, x0: u32) -> vec4<C_x> {
    return vec4<C_x>(dy_at(base, y, x0), dy_at(base, y, x0 + 1u), dy_at(base, y, x0 + 2u), dy_at(base, y, x0 + 3u));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let at = tile_at(i);
    let base = p.offset + (at.img * p.channels + at.row) * p.h * p.w;
    let y0 = 4u * at.ty;
    let x0 = 4u * at.tx;
    // A down the tile's columns, then along each of the six rows (four at a time).
    let r = dy_t(Four(tile_row(base, y0, x0), tile_row(base, y0 + 1u, x0), tile_row(base, y0 + 2u, x0), tile_row(base, y0 + 3u, x0)));
    let c0 = Four(vec4<C_x>(r.v0.x, r.v1.x, r.v2.x, r.v3.x), vec4<C_x>(r.v0.y, r.v1.y, r.v2.y, r.v3.y), vec4<C_x>(r.v0.z, r.v1.z, r.v2.z, r.v3.z), vec4<C_x>(r.v0.w, r.v1.w, r.v2.w, r.v3.w));
    put(i, 0u, 4u, dy_t(c0));
    let z = C_x(0);
    let c1 = Four(vec4<C_x>(r.v4.x, r.v5.x, z, z), vec4<C_x>(r.v4.y, r.v5.y, z, z), vec4<C_x>(r.v4.z, r.v5.z, z, z), vec4<C_x>(r.v4.w, r.v5.w, z, z));
    put(i, 4u, 2u, dy_t(c1));
}
