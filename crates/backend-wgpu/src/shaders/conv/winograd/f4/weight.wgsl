// Winograd F(4x4, 3x3), the filter transform: each 3 x 3 kernel g becomes U = G g G^T, stored
// as 36 matrices [M, K] (element (r, s) in matrix 6 r + s): the a operands of the products.
// The forward's product has M = O rows and K = C; the input gradient's (FLIP) M = C and
// K = O, with g the kernel of (o = k, c = m) turned by 180 degrees.
//
// `WinogradKernel`: p.invocations = M * K, p.m, p.k, p.offset (w's).

@group(0) @binding(2) var<storage, read_write> dst: array<S_x>;

fn kernel_row(m: u32, k: u32, ky: u32) -> vec4<C_x> {
    return vec4<C_x>(tap(m, k, ky, 0u), tap(m, k, ky, 1u), tap(m, k, ky, 2u), C_x(0));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.invocations) { return; }
    let m = i / p.k;
    let k = i - m * p.k;
    // G down the kernel's columns, then along each of the six rows (four at a time).
    let r = kernel_t(Three(kernel_row(m, k, 0u), kernel_row(m, k, 1u), kernel_row(m, k, 2u)));
    put(i, 0u, 4u, kernel_t(Three(vec4<C_x>(r.v0.x, r.v1.x, r.v2.x, r.v3.x), vec4<C_x>(r.v0.y, r.v1.y, r.v2.y, r.v3.y), vec4<C_x>(r.v0.z, r.v1.z, r.v2.z, r.v3.z))));
    let z = C_x(0);
    put(i, 4u, 2u, kernel_t(Three(vec4<C_x>(r.v4.x, r.v5.x, z, z), vec4<C_x>(r.v4.y, r.v5.y, z, z), vec4<C_x>(r.v4.z, r.v5.z, z, z))));
}
