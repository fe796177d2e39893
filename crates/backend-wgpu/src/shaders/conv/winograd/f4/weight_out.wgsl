// Winograd F(3x3, 4x4) for the weight gradient, the output transform: element (o, c) of the
// 36 products (each the sum over every tile of transformed dy times transformed x, element
// (r, s) in matrix 6 r + s) is the transformed gradient Mt of kernel (o, c), and G^T Mt G its
// 3 x 3 taps, stored into dw [O, C, 3, 3].
//
// `WinogradInvocations`: p.invocations = O * C.

@group(0) @binding(1) var<storage, read> prod: array<S_x>;
@group(0) @binding(2) var<storage, read_write> dw: array<S_t>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    // G^T down the columns (four at a time), then along each of the three rows.
    let l = grad_t(lo_rows(i));
    let h = grad_t(hi_rows(i));
    let z = vec4<C_x>();
    let taps = grad_t(cols(l.v0, l.v1, l.v2, z, h.v0, h.v1, h.v2, z));
    // taps.v_kx holds column kx, its rows ky in the components.
    for (var ky = 0u; ky < 3u; ky++) {
        dw[i * 9u + 3u * ky] = store_t(taps.v0[ky]);
        dw[i * 9u + 3u * ky + 1u] = store_t(taps.v1[ky]);
        dw[i * 9u + 3u * ky + 2u] = store_t(taps.v2[ky]);
    }
}
