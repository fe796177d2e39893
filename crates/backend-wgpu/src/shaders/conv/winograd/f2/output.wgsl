// Winograd F(2x2, 3x3), the output transform: the 16 products' element (o, p) (the matrices
// [M, P] of v[xi] = u[xi] v[xi], xi = 4 r + s) is the tile's transformed output Mt, and its
// 2 x 2 outputs are A^T Mt A, stored into y [N, M, H, W] where they lie inside the image.
//
// A^T = [1 1 1 0; 0 1 -1 -1].
//
// `WinogradOutput` (`conv/winograd.rs`): p.invocations = M * P, p.patches = P,
// p.tiles per image, p.tiles_w per row, p.h,
// p.w (y's), p.channels = M.

@group(0) @binding(1) var<storage, read> prod: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_t>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let tile = tile_at(i);
    let r1 = mt_row(i, 1u);
    let r2 = mt_row(i, 2u);
    let top = mt_row(i, 0u) + r1 + r2;
    let bottom = r1 - r2 - mt_row(i, 3u);
    let h = p.h;
    let w = p.w;
    let base = (tile.img * p.channels + tile.row) * h * w;
    let yy = 2u * tile.ty;
    let xx = 2u * tile.tx;
    let right = xx + 1u < w;
    y[base + yy * w + xx] = store_t(top.x + top.y + top.z);
    if (right) { y[base + yy * w + xx + 1u] = store_t(top.y - top.z - top.w); }
    if (yy + 1u < h) {
        y[base + (yy + 1u) * w + xx] = store_t(bottom.x + bottom.y + bottom.z);
        if (right) { y[base + (yy + 1u) * w + xx + 1u] = store_t(bottom.y - bottom.z - bottom.w); }
    }
}
