// Winograd F(2x2, 3x3), the data transform: each 4 x 4 patch d of x (a 2 x 2 output tile's
// window, stride 2, the padding read as zeros) becomes V = B^T d B, stored as 16 matrices
// v[xi] = [C, P] (xi = 4 r + s, P = N * tiles): the b operands of the 16 products.
//
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
//
// `WinogradPatch` (`conv/winograd.rs`): p.invocations = C * P, p.patches = P,
// p.tiles per image, p.tiles_w per row (the tiles of the
// output), p.h, p.w (x's), p.offset (x's), p.channels = C, p.pad (rows and columns of zeros
// around x).

@group(0) @binding(1) var<storage, read> x: array<A_t>;
@group(0) @binding(2) var<storage, read_write> v: array<S_x>;

// B^T applied to the four rows (or, on the transposed side, four columns) of a patch.
fn bt(d0: vec4<C_x>, d1: vec4<C_x>, d2: vec4<C_x>, d3: vec4<C_x>) -> array<vec4<C_x>, 4> {
    return array<vec4<C_x>, 4>(d0 - d2, d1 + d2, d2 - d1, d1 - d3);
}

// Row y of the patch whose top-left corner is (y0, x0), zeros outside the image.
fn patch_row(base: u32, y: i32, x0: i32) -> vec4<C_x> {
    let h = i32(p.h);
    let w = i32(p.w);
    var r = vec4<C_x>();
    if (y < 0 || y >= h) { return r; }
    let row = base + u32(y) * p.w;
    for (var j = 0; j < 4; j++) {
        let xx = x0 + j;
        if (xx >= 0 && xx < w) {
            let e = row + u32(xx);
            r[j] = read_t(x[e >> SHIFT_T], e);
        }
    }
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let tile = tile_at(i);
    let base = p.offset + (tile.img * p.channels + tile.row) * p.h * p.w;
    let y0 = i32(2u * tile.ty) - i32(p.pad);
    let x0 = i32(2u * tile.tx) - i32(p.pad);
    var rows = bt(patch_row(base, y0, x0), patch_row(base, y0 + 1, x0), patch_row(base, y0 + 2, x0), patch_row(base, y0 + 3, x0));
    // The same transform along each row; element (r, s) goes to v[4 r + s][c, p].
    let step = p.invocations;
    for (var r = 0u; r < 4u; r++) {
        let e = rows[r];
        let out = vec4<C_x>(e.x - e.z, e.y + e.z, e.z - e.y, e.y - e.w);
        for (var s = 0u; s < 4u; s++) {
            v[(4u * r + s) * step + i] = store_x(out[s]);
        }
    }
}
