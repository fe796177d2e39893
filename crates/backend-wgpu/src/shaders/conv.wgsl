// Convolution as implicit GEMM: the tiled product of matmul/tile.wgsl over operands that are
// never materialized. A loader computes, for each element of a slice, where in x (or dy) the
// column matrix of im2col would have read it, so no column buffer exists. One dispatch per
// pass, batched over the G groups (z = g * S + s with S splits of K):
//
//   forward        y[g]  (O/G x N*L)     = w'[g] (O/G x K)      * cols(x)[g] (K x N*L)
//   input grad     dx[g] (C/G x N*H*W)   = w''[g] (C/G x K')    * cols(dy)[g] (K' x N*H*W)
//   weight grad    dw[g] (O/G x C/G*kh*kw) = dy[g] (O/G x N*L)  * cols(x)[g]^T
//
// with L = out_h * out_w, K = kh*kw * C/G ordered tap-major (tap t = ky * kw + kx, then
// channel), K' = kh*kw * O/G likewise; w' and w'' are the weights permuted to match (by a
// copy of the weights, small beside the activations). Columns run over images and positions
// (n, p), so small images still fill the tiles.
//
// params: [0] G, [1] M, [2] K, [3] N, [5] / [6] a's strides over M / K, [12] a's scalar
// loader walks M (0: K), [14] S, [15] KS; [16] N (images), [17] C, [18] H, [19] W, [20] O,
// [21] kh, [22] kw, [23..25] stride, [25..27] padding, [27..29] dilation, [29] out_h,
// [30] out_w, [31] G; [32] / [33]: offsets of the b / a operands; [34] P, [35] RS: output
// element (m, n) of a group is at m * P + (n / P) * RS + n % P; [36] / [37] / [38]: per group
// strides of a, b and y; [39] the output's size (a split's stride in the partial sums);
// [40..46] the gathered operand (conv/gather.wgsl); [52] / [53] PHASE: the steps in y between
// a phase's rows and columns, [54] its first pixel (conv.rs), folded into ybase; [55] the
// bias's offset (conv/bias.wgsl).
//
// The product is matmul/tile.wgsl's (WG = 256 invocations) or, for f16 on cooperative
// matrices, matmul_coop.wgsl's (WG as its variant has it; forward and input gradient).
//
// PHASE: the input gradient of one phase of a strided convolution, whose columns are the
// pixels (i, j) of the phase's grid ([45] wide, [46] in all) in each image, at row
// first + i * stride of the input.

// The first output row (channel) of the group being computed.
var<private> group_row: u32;

fn out_at(ybase: u32, m: u32, n: u32) -> u32 {
    if (PHASE) {
        let q = params[46];
        let img = n / q;
        let r = n - img * q;
        let i = r / params[45];
        return ybase + img * params[35] + m * params[34] + i * params[52] + (r - i * params[45]) * params[53];
    }
    let p = params[34];
    let img = n / p;
    return ybase + img * params[35] + m * p + (n - img * p);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Tiles beyond the grid's 65,535 per dimension are taken in turn by the workgroups.
    let d = dims_();
    let splits = params[14];
    let mt = (d.y + BM - 1u) / BM;
    let nt = (d.w + BN - 1u) / BN;
    for (var z = wid.z; z < d.x * splits; z += nwg.z) {
        let g = z / splits;
        let s = z % splits;
        group_row = g * d.y;
        let k0 = s * params[15];
        let k1 = min(d.z, k0 + params[15]);
        let ybase = s * params[39] + g * params[38] + params[54];
        let abase = params[33] + g * params[36];
        let bbase = params[32] + g * params[37];
        for (var my = wid.y; my < mt; my += nwg.y) {
            for (var nx = wid.x; nx < nt; nx += nwg.x) {
                tile(abase, bbase, my * BM, nx * BN, k0, k1, ybase, lid);
            }
        }
    }
}
