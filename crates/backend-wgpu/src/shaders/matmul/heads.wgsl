// A batch of small products y[b] = a[b] x b[b] whose every y[b] fits one 80 x 80 tile but not
// one 64 x 64 tile (M or N of 65 to 80: a ViT's attention, 65 tokens a head): one workgroup a
// tile, where the tiled kernel (matmul/tile.wgsl) would spend four 64 x 64 tiles, or one of
// 128 x 128, on each 65 x 65 y[b], three quarters of them empty.
//
// A workgroup of 16 x 16 invocations computes an 80 x 80 tile, each invocation a 5 x 5 grid
// of it lying 16 apart (rows ty, ty + 16, .., columns tx, tx + 16, ..: neighbours read
// neighbouring words of workgroup memory), its sums in 25 registers indexed by constants
// only (an index computed in a loop would put them in memory). Each
// 16-deep slice of a and b is staged in workgroup memory through the operands' strides,
// zeros past the edges, neighbouring invocations reading along K or along M / N, whichever
// the operand's smaller stride is (p.a_walk_m / p.b_walk_n, as matmul.wgsl's scalar loaders).
//
// The parameter block is matmul.wgsl's (`MatmulParams`). The
// including shader provides fetch_a / fetch_b (matmul/read_a.wgsl, read_b.wgsl) and store_y
// (matmul/write.wgsl).

const HT: u32 = 80u;
const HK: u32 = 16u;

// The staged slices, K-major: ha_[kk * HT + r] = a[m0 + r, k0 + kk], hb_[kk * HT + c] = b[k0 + kk, n0 + c].
var<workgroup> ha_: array<C_x, 1280>;
var<workgroup> hb_: array<C_x, 1280>;

// acc[i * 5 + j]: row ty + 16 i, column tx + 16 j of the tile.
var<private> acc: array<C_x, 25>;

// The slices at k0 of the tile at (m0, n0): 1280 elements of each, five an invocation.
fn stage(abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, lid: u32) {
    let d = vec4<u32>(p.batch, p.m, p.k, p.n);
    for (var piece = 0u; piece < 5u; piece++) {
        let e = lid + 256u * piece;
        var at = vec2<u32>(e / HK, e % HK);
        if (p.a_walk_m != 0u) { at = vec2<u32>(e % HT, e / HT); }
        var x = C_x(0);
        if (m0 + at.x < d.y && k0 + at.y < d.z) { x = fetch_a(abase + (m0 + at.x) * p.a_stride_m + (k0 + at.y) * p.a_stride_k); }
        ha_[at.y * HT + at.x] = x;
        var bt = vec2<u32>(e / HK, e % HK);
        if (p.b_walk_n != 0u) { bt = vec2<u32>(e % HT, e / HT); }
        var z = C_x(0);
        if (n0 + bt.x < d.w && k0 + bt.y < d.z) { z = fetch_b(bbase + (k0 + bt.y) * p.b_stride_k + (n0 + bt.x) * p.b_stride_n); }
        hb_[bt.y * HT + bt.x] = z;
    }
}

// acc += the outer product of row kk of the staged slices.
fn mac(kk: u32, tx: u32, ty: u32) {
    let a0 = ha_[kk * HT + ty + 0u];
    let a1 = ha_[kk * HT + ty + 16u];
    let a2 = ha_[kk * HT + ty + 32u];
    let a3 = ha_[kk * HT + ty + 48u];
    let a4 = ha_[kk * HT + ty + 64u];
    let b0 = hb_[kk * HT + tx + 0u];
    let b1 = hb_[kk * HT + tx + 16u];
    let b2 = hb_[kk * HT + tx + 32u];
    let b3 = hb_[kk * HT + tx + 48u];
    let b4 = hb_[kk * HT + tx + 64u];
    acc[0] = fma(a0, b0, acc[0]);
    acc[1] = fma(a0, b1, acc[1]);
    acc[2] = fma(a0, b2, acc[2]);
    acc[3] = fma(a0, b3, acc[3]);
    acc[4] = fma(a0, b4, acc[4]);
    acc[5] = fma(a1, b0, acc[5]);
    acc[6] = fma(a1, b1, acc[6]);
    acc[7] = fma(a1, b2, acc[7]);
    acc[8] = fma(a1, b3, acc[8]);
    acc[9] = fma(a1, b4, acc[9]);
    acc[10] = fma(a2, b0, acc[10]);
    acc[11] = fma(a2, b1, acc[11]);
    acc[12] = fma(a2, b2, acc[12]);
    acc[13] = fma(a2, b3, acc[13]);
    acc[14] = fma(a2, b4, acc[14]);
    acc[15] = fma(a3, b0, acc[15]);
    acc[16] = fma(a3, b1, acc[16]);
    acc[17] = fma(a3, b2, acc[17]);
    acc[18] = fma(a3, b3, acc[18]);
    acc[19] = fma(a3, b4, acc[19]);
    acc[20] = fma(a4, b0, acc[20]);
    acc[21] = fma(a4, b1, acc[21]);
    acc[22] = fma(a4, b2, acc[22]);
    acc[23] = fma(a4, b3, acc[23]);
    acc[24] = fma(a4, b4, acc[24]);
}

fn put(ybase: u32, m: u32, n: u32, v: C_x) {
    if (m < p.m && n < p.n) { store_y(ybase + m * p.n + n, v); }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = vec4<u32>(p.batch, p.m, p.k, p.n);
    let tx = lid % 16u;
    let ty = lid / 16u;
    let mt = (d.y + HT - 1u) / HT;
    let nt = (d.w + HT - 1u) / HT;
    // Tiles beyond the grid's 65,535 per dimension are taken in turn by the workgroups.
    for (var b = wid.z; b < d.x; b += nwg.z) {
        let abase = p.a_offset + b * p.a_stride_b;
        let bbase = p.b_offset + b * p.b_stride_b;
        let ybase = b * d.y * d.w;
        for (var my = wid.y; my < mt; my += nwg.y) {
            for (var nx = wid.x; nx < nt; nx += nwg.x) {
                let m0 = my * HT;
                let n0 = nx * HT;
                acc = array<C_x, 25>();
                for (var k0 = 0u; k0 < d.z; k0 += HK) {
                    // The last slice's reads are done before this one overwrites it.
                    workgroupBarrier();
                    stage(abase, bbase, m0, n0, k0, lid);
                    workgroupBarrier();
                    for (var kk = 0u; kk < HK; kk += 4u) {
                        mac(kk, tx, ty);
                        mac(kk + 1u, tx, ty);
                        mac(kk + 2u, tx, ty);
                        mac(kk + 3u, tx, ty);
                    }
                }
                put(ybase, m0 + ty + 0u, n0 + tx + 0u, acc[0]);
                put(ybase, m0 + ty + 0u, n0 + tx + 16u, acc[1]);
                put(ybase, m0 + ty + 0u, n0 + tx + 32u, acc[2]);
                put(ybase, m0 + ty + 0u, n0 + tx + 48u, acc[3]);
                put(ybase, m0 + ty + 0u, n0 + tx + 64u, acc[4]);
                put(ybase, m0 + ty + 16u, n0 + tx + 0u, acc[5]);
                put(ybase, m0 + ty + 16u, n0 + tx + 16u, acc[6]);
                put(ybase, m0 + ty + 16u, n0 + tx + 32u, acc[7]);
                put(ybase, m0 + ty + 16u, n0 + tx + 48u, acc[8]);
                put(ybase, m0 + ty + 16u, n0 + tx + 64u, acc[9]);
                put(ybase, m0 + ty + 32u, n0 + tx + 0u, acc[10]);
                put(ybase, m0 + ty + 32u, n0 + tx + 16u, acc[11]);
                put(ybase, m0 + ty + 32u, n0 + tx + 32u, acc[12]);
                put(ybase, m0 + ty + 32u, n0 + tx + 48u, acc[13]);
                put(ybase, m0 + ty + 32u, n0 + tx + 64u, acc[14]);
                put(ybase, m0 + ty + 48u, n0 + tx + 0u, acc[15]);
                put(ybase, m0 + ty + 48u, n0 + tx + 16u, acc[16]);
                put(ybase, m0 + ty + 48u, n0 + tx + 32u, acc[17]);
                put(ybase, m0 + ty + 48u, n0 + tx + 48u, acc[18]);
                put(ybase, m0 + ty + 48u, n0 + tx + 64u, acc[19]);
                put(ybase, m0 + ty + 64u, n0 + tx + 0u, acc[20]);
                put(ybase, m0 + ty + 64u, n0 + tx + 16u, acc[21]);
                put(ybase, m0 + ty + 64u, n0 + tx + 32u, acc[22]);
                put(ybase, m0 + ty + 64u, n0 + tx + 48u, acc[23]);
                put(ybase, m0 + ty + 64u, n0 + tx + 64u, acc[24]);
            }
        }
    }
}
