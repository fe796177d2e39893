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
// `ConvParams` (`conv.rs`): p.batch = G, p.m, p.k, p.n, a's strides p.a_stride_m / p.a_stride_k,
// p.a_walk_m (a's scalar loader walks M, else K), p.splits = S, p.split_k = KS, as matmul's;
// then the geometry (p.images, p.c, p.h, p.w, p.o, the taps p.kh x p.kw, stride, padding,
// dilation, p.out_h, p.out_w, p.groups); p.b_base / p.a_base: the offsets of the b / a
// operands; p.out_p = P, p.out_rs = RS: output element (m, n) of a group is at
// m * P + (n / P) * RS + n % P; per group strides of a, b and y; p.total, the output's size (a
// split's stride in the partial sums); the gathered operand g (conv/taps.wgsl); PHASE: the
// steps in y between a phase's rows and columns and its first pixel (conv.rs), folded into
// ybase; p.bias_offset (conv/bias.wgsl).
//
// PHASES (conv/phases.wgsl): every phase of a strided input gradient in one dispatch, its
// fields filled in by enter_phase; else one product (conv/one_phase.wgsl).
//
// The product is matmul/tile.wgsl's (WG = 256 invocations) or, for f16 on cooperative
// matrices, matmul_coop.wgsl's (WG as its variant has it; forward and input gradient).
//
// PHASE: the input gradient of one phase of a strided convolution, whose columns are the
// pixels (i, j) of the phase's grid (p.cols_w wide, p.cols in all) in each image, at row
// first + i * stride of the input.

// The first output row (channel) of the group being computed.
var<private> group_row: u32;

fn out_at(ybase: u32, m: u32, n: u32) -> u32 {
    if (PHASE) {
        let q = p.cols;
        let img = n / q;
        let r = n - img * q;
        let i = r / p.cols_w;
        return ybase + img * p.out_rs + m * p.out_p + i * p.phase_row_step + (r - i * p.cols_w) * p.phase_col_step;
    }
    let row = p.out_p;
    let img = n / row;
    return ybase + img * p.out_rs + m * row + (n - img * row);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Tiles beyond the grid's 65,535 per dimension are taken in turn by the workgroups; z runs
    // over the phases (conv/phases.wgsl), then the groups, then the splits.
    enter_phase(0u);
    let splits = p.splits;
    let per_phase = p.batch * splits;
    for (var z = wid.z; z < phase_count() * per_phase; z += nwg.z) {
        enter_phase(z / per_phase);
        let d = dims_();
        let mt = (d.y + BM - 1u) / BM;
        let nt = (d.w + BN - 1u) / BN;
        let g = (z % per_phase) / splits;
        let s = z % splits;
        group_row = g * d.y;
        let k0 = s * p.split_k;
        let k1 = min(d.z, k0 + p.split_k);
        let ybase = s * p.total + g * p.y_group_stride + p.phase_first;
        let abase = p.a_base + g * p.a_group_stride;
        let bbase = p.b_base + g * p.b_group_stride;
        for (var my = wid.y; my < mt; my += nwg.y) {
            for (var nx = wid.x; nx < nt; nx += nwg.x) {
                tile(abase, bbase, my * BM, nx * BN, k0, k1, ybase, lid);
            }
        }
    }
}
