// Winograd F(3x3, 2x2) for the weight gradient, the output transform: element (o, c) of the
// 16 products (each the sum over every tile of transformed dy times transformed x, xi = 4 r +
// s) is the transformed gradient Mt of kernel (o, c), and G^T Mt G its 3 x 3 taps, stored
// into dw [O, C, 3, 3]. G is weight.wgsl's [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
//
// `WinogradInvocations`: p.invocations = O * C.

@group(0) @binding(1) var<storage, read> prod: array<S_x>;
@group(0) @binding(2) var<storage, read_write> dw: array<S_t>;

// G^T applied to four values: three.
fn gt(v: vec4<C_x>) -> vec3<C_x> {
    let half = C_x(0.5);
    let mid = half * (v.y + v.z);
    return vec3<C_x>(v.x + mid, half * (v.y - v.z), mid + v.w);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let m0 = mt_row(i, 0u);
    let m1 = mt_row(i, 1u);
    let m2 = mt_row(i, 2u);
    let m3 = mt_row(i, 3u);
    let half = C_x(0.5);
    let mid = half * (m1 + m2);
    var rows = array<vec3<C_x>, 3>(gt(m0 + mid), gt(half * (m1 - m2)), gt(mid + m3));
    for (var r = 0u; r < 3u; r++) {
        let e = rows[r];
        for (var s = 0u; s < 3u; s++) {
            dw[i * 9u + 3u * r + s] = store_t(e[s]);
        }
    }
}
