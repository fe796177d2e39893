// Winograd F(4x4, 3x3), the output transform: element (o, p) of the 36 products (matrices
// [M, P], element (r, s) of the tile in matrix 6 r + s) is the tile's transformed output Mt,
// and its 4 x 4 outputs are A^T Mt A, stored into y [N, M, H, W] where they lie inside the
// image.
//
// `WinogradOutput` (`conv/winograd.rs`): p.invocations = M * P, p.patches = P,
// p.tiles per image, p.tiles_w per row, p.h,
// p.w (y's), p.channels = M.

@group(0) @binding(1) var<storage, read> prod: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_t>;

// Column j of the tile (rows in its components) at (y0, x0 + j) of the plane at base.
fn store_col(base: u32, y0: u32, xx: u32, v: vec4<C_x>) {
    let h = p.h;
    let w = p.w;
    if (xx >= w) { return; }
    for (var a = 0u; a < 4u; a++) {
        if (y0 + a < h) {
            y[base + (y0 + a) * w + xx] = store_t(v[a]);
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let at = tile_at(i);
    // A^T down the columns (four at a time), then along each of the four rows.
    let l = out_t(lo_rows(i));
    let h = out_t(hi_rows(i));
    let out = out_t(cols(l.v0, l.v1, l.v2, l.v3, h.v0, h.v1, h.v2, h.v3));
    let base = (at.img * p.channels + at.row) * p.h * p.w;
    let y0 = 4u * at.ty;
    let x0 = 4u * at.tx;
    store_col(base, y0, x0, out.v0);
    store_col(base, y0, x0 + 1u, out.v1);
    store_col(base, y0, x0 + 2u, out.v2);
    store_col(base, y0, x0 + 3u, out.v3);
}
