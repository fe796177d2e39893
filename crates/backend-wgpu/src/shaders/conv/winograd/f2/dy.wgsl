// Winograd F(3x3, 2x2) for the weight gradient, the transform of dy: each 2 x 2 tile e of dy
// (zeros past the image's edge) becomes A e A^T, stored as 16 matrices u[xi] = [O, P]
// (xi = 4 r + s): the a operands of the 16 products whose b operands are input.wgsl's
// patches of x, transposed. A^T is output.wgsl's [1 1 1 0; 0 1 -1 -1].
//
// `WinogradPatch` (`conv/winograd.rs`): p.invocations = O * P, p.patches = P,
// p.tiles per image, p.tiles_w per row, p.h,
// p.w (dy's: the output's), p.offset (dy's), p.channels = O.

@group(0) @binding(1) var<storage, read> dy: array<A_t>;
@group(0) @binding(2) var<storage, read_write> u: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let tile = tile_at(i);
    let h = p.h;
    let w = p.w;
    let at = p.offset + (tile.img * p.channels + tile.row) * h * w + 2u * tile.ty * w + 2u * tile.tx;
    let right = 2u * tile.tx + 1u < w;
    let below = 2u * tile.ty + 1u < h;
    var top = vec2<C_x>(read_t(dy[at >> SHIFT_T], at), C_x(0));
    var bottom = vec2<C_x>();
    if (right) { top.y = read_t(dy[(at + 1u) >> SHIFT_T], at + 1u); }
    if (below) {
        bottom.x = read_t(dy[(at + w) >> SHIFT_T], at + w);
        if (right) { bottom.y = read_t(dy[(at + w + 1u) >> SHIFT_T], at + w + 1u); }
    }
    // A along the rows, then along each row.
    var rows = array<vec2<C_x>, 4>(top, top + bottom, top - bottom, -bottom);
    let step = p.invocations;
    for (var r = 0u; r < 4u; r++) {
        let e = rows[r];
        let out = vec4<C_x>(e.x, e.x + e.y, e.x - e.y, -e.y);
        for (var s = 0u; s < 4u; s++) {
            u[(4u * r + s) * step + i] = store_x(out[s]);
        }
    }
}
