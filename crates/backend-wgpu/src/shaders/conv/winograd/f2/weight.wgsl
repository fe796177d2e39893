// Winograd F(2x2, 3x3), the filter transform: each 3 x 3 kernel g becomes U = G g G^T,
// stored as 16 matrices u[xi] = [M, K] (the a operands of the 16 products; xi = 4 r + s).
// The forward's product has M = O rows and K = C; the input gradient's (FLIP) M = C and
// K = O, with g the kernel of (o = k, c = m) turned by 180 degrees (a stride-1 input
// gradient with padding 1 is the forward convolution of dy with those kernels).
//
// G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
//
// `WinogradKernel`: p.invocations = M * K, p.m, p.k, p.offset (w's).

@group(0) @binding(2) var<storage, read_write> u: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let m = i / p.k;
    let k = i - m * p.k;
    var g: array<vec3<C_x>, 3>;
    for (var ky = 0u; ky < 3u; ky++) {
        g[ky] = vec3<C_x>(tap(m, k, ky, 0u), tap(m, k, ky, 1u), tap(m, k, ky, 2u));
    }
    let half = C_x(0.5);
    var rows = array<vec3<C_x>, 4>(g[0], half * (g[0] + g[1] + g[2]), half * (g[0] - g[1] + g[2]), g[2]);
    let step = p.invocations;
    for (var r = 0u; r < 4u; r++) {
        let e = rows[r];
        let out = vec4<C_x>(e.x, half * (e.x + e.y + e.z), half * (e.x - e.y + e.z), e.z);
        for (var s = 0u; s < 4u; s++) {
            u[(4u * r + s) * step + i] = store_x(out[s]);
        }
    }
}
