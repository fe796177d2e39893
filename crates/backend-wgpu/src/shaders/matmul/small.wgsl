// A small batched product y[b] = a[b] x b[b] (few outputs, K not long: an LSTM step's
// `[64, 256] x [256, 1024]`), whose time on the tiled kernel is latency: its K is split over
// the invocations of one workgroup instead of over workgroups whose partial sums another
// kernel adds, so the product is one dispatch.
//
// A workgroup computes a BM x BN block of y (16 x 16 or 8 x 16, chosen in matmul.rs): its 256
// invocations are G groups of GI, each invocation of a group holding a 4 x 4 block of sums,
// and group g takes the vec4 steps g, g + G, g + 2G, ... of K (neighbouring groups read
// neighbouring vec4s). The groups' sums then meet in workgroup memory (16 KiB), where they are
// added up in group order and stored. Operands are read straight from the buffers (each row
// of the block is read by several invocations of a group, through the cache), with rows and
// columns past the edges clamped to the last one (read, never stored).
//
// a is read in vec4s along K (row-major [M, K]); b in vec4s along K (B_LOAD == LOAD_K: a
// transposed view of an [N, K] matrix, as a linear layer's weight) or along N (LOAD_OUTER:
// row-major [K, N]). K is a multiple of 4 (a's vec4s along it), and N too under LOAD_OUTER.
//
// The parameter block is matmul.wgsl's (`MatmulParams`), p.bias_offset with matmul/bias.wgsl.
// The including shader provides fetch_a4 / fetch_b4 (matmul/read_a4.wgsl, read_b4.wgsl),
// store_y (matmul/write.wgsl), epilogue (matmul/no_bias.wgsl or bias.wgsl) and the sums'
// loops (matmul/small_sums.wgsl).

const LOAD_K: u32 = 0u;
const LOAD_OUTER: u32 = 1u;
// G groups of GI invocations, each a 4 x 4 block of the workgroup's BM x BN.
const GI: u32 = (BM / 4u) * (BN / 4u);
const G: u32 = 256u / GI;

// sums_[(g * GI + i) * 4 + r]: row r of invocation i's 4 x 4 block in group g (four columns).
var<workgroup> sums_: array<vec4<C_x>, 1024>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let batch = p.batch;
    let m_len = p.m;
    let k_len = p.k;
    let n_len = p.n;
    let g = lid / GI;
    let i = lid % GI;
    let mt = (m_len + BM - 1u) / BM;
    let nt = (n_len + BN - 1u) / BN;
    for (var b = wid.z; b < batch; b += nwg.z) {
        let abase = p.a_offset + b * p.a_stride_b;
        let bbase = p.b_offset + b * p.b_stride_b;
        let ybase = b * m_len * n_len;
        for (var my = wid.y; my < mt; my += nwg.y) {
            for (var nx = wid.x; nx < nt; nx += nwg.x) {
                let m0 = my * BM + (i / (BN / 4u)) * 4u;
                let n0 = nx * BN + (i % (BN / 4u)) * 4u;
                // Rows of a (and of b's [N, K] view) past the edge read the last one.
                let ra = vec4<u32>(
                    abase + min(m0, m_len - 1u) * p.a_stride_m,
                    abase + min(m0 + 1u, m_len - 1u) * p.a_stride_m,
                    abase + min(m0 + 2u, m_len - 1u) * p.a_stride_m,
                    abase + min(m0 + 3u, m_len - 1u) * p.a_stride_m,
                );
                var s: Sums4;
                if (B_LOAD == LOAD_K) {
                    let rb = vec4<u32>(
                        bbase + min(n0, n_len - 1u) * p.b_stride_n,
                        bbase + min(n0 + 1u, n_len - 1u) * p.b_stride_n,
                        bbase + min(n0 + 2u, n_len - 1u) * p.b_stride_n,
                        bbase + min(n0 + 3u, n_len - 1u) * p.b_stride_n,
                    );
                    s = sums_k(ra, rb, g, k_len);
                } else {
                    // Four columns in one vec4 (N a multiple of 4); a block past the edge reads
                    // the first columns.
                    s = sums_n(ra, bbase + select(0u, n0, n0 < n_len), p.b_stride_k, g, k_len);
                }
                let at = (g * GI + i) * 4u;
                sums_[at] = s.r0;
                sums_[at + 1u] = s.r1;
                sums_[at + 2u] = s.r2;
                sums_[at + 3u] = s.r3;
                workgroupBarrier();
                // Element (r, c) of the block: row r % 4 of invocation (r / 4) * BN / 4 + c / 4,
                // lane c % 4.
                for (var e = lid; e < BM * BN; e += 256u) {
                    let r = e / BN;
                    let c = e % BN;
                    let held = ((r / 4u) * (BN / 4u) + c / 4u) * 4u + r % 4u;
                    var total = C_x(0);
                    for (var h = 0u; h < G; h++) {
                        total += sums_[h * GI * 4u + held][c % 4u];
                    }
                    let m = my * BM + r;
                    let n = nx * BN + c;
                    if (m < m_len && n < n_len) {
                        store_y(ybase + m * n_len + n, epilogue(m, n, vec4<C_x>(total, C_x(0), C_x(0), C_x(0))).x);
                    }
                }
                // The next block's sums overwrite these.
                workgroupBarrier();
            }
        }
    }
}
