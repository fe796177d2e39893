// The entry point of a matrix product, tiled (matmul.wgsl, WG = 256) or on cooperative
// matrices (matmul_coop.wgsl, WG as its variant has it): y[b] is row-major, and the loaders
// need no set-up per tile. (A convolution has its own, conv.wgsl.) FLAT (chosen per kernel):
// where the grid has a workgroup for every tile of every product, each computes its tile with
// no loops around it, which the driver compiles differently (faster for the tensor cores'
// `prefetch` kernel, slower for the tiled f32 one).

fn begin_tile(m0: u32, n0: u32, lid: u32) {}

fn out_at(ybase: u32, m: u32, n: u32) -> u32 {
    return ybase + m * p.n + n;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Tiles beyond the grid's 65,535 per dimension are taken in turn by the workgroups.
    let d = dims_();
    let splits = p.splits;
    let mt = (d.y + BM - 1u) / BM;
    let nt = (d.w + BN - 1u) / BN;
    if (FLAT && nwg.x == nt && nwg.y == mt && nwg.z == d.x * splits) {
        // A workgroup for every tile: one tile each, with no loops around it.
        let z = wid.z;
        let b = z / splits;
        let k0 = (z % splits) * p.split_k;
        let k1 = min(d.z, k0 + p.split_k);
        let ybase = ((z % splits) * d.x + b) * d.y * d.w;
        tile(p.a_offset + b * p.a_stride_b, p.b_offset + b * p.b_stride_b, wid.y * BM, wid.x * BN, k0, k1, ybase, lid);
        return;
    }
    for (var z = wid.z; z < d.x * splits; z += nwg.z) {
        let b = z / splits;
        let k0 = (z % splits) * p.split_k;
        let k1 = min(d.z, k0 + p.split_k);
        let ybase = ((z % splits) * d.x + b) * d.y * d.w;
        for (var my = wid.y; my < mt; my += nwg.y) {
            for (var nx = wid.x; nx < nt; nx += nwg.x) {
                tile(p.a_offset + b * p.a_stride_b, p.b_offset + b * p.b_stride_b, my * BM, nx * BN, k0, k1, ybase, lid);
            }
        }
    }
}
