// ops::LstmStep: an LSTM step with its recurrent product, one dispatch. h_gates = h W_hh^T
// ([N, 4H]), then the cell of x_gates + h_gates as fused_lstm_cell.wgsl computes it: out
// [2, N, H] = (h', c'). The product is matmul/small.wgsl's (its sums' loop is
// matmul/small_sums.wgsl's), with a block's columns taken as its units' four gates, so that
// the workgroup that finishes a unit's sums also runs its cell.
//
// A workgroup computes BM rows x BU units (all four gates of each): its 256 invocations are G
// groups of GI, each invocation holding 4 rows x the 4 gates of one unit, group g taking the
// vec4 steps g, g + G, ... of K = H. The groups' sums meet in workgroup memory; each
// invocation adds up one (row, unit, gate) sum and keeps it for the cell, which BM x BU
// invocations then run. Rows and units past the edges read the last one and store nothing.
// The operands' bindings and the stores of the block's results are lstm_step_io.wgsl's (the
// dtype as stored) or packed/lstm_step_io.wgsl's (packed bf16, PACKED), which writes a word
// of two units at a time once the block's values are in workgroup memory.
//
// `LstmStepParams` (`lstm_step.rs`): p.n = N, p.h = H (a multiple of 4), and the element offsets
// of x_gates, h, W_hh and c (h's and W_hh's multiples of 4: they are read in vec4s along H).

const BM: u32 = 8u;
const BU: u32 = 8u;
const GI: u32 = (BM / 4u) * BU;
const G: u32 = 256u / GI;

// sums_[(g * GI + i) * 4 + r]: row r of invocation i's sums in group g, its unit's four gates.
var<workgroup> sums_: array<vec4<C_x>, 1024>;
// The block's finished products, rounded to the dtype: [(r * BU + u) * 4 + gate].
var<workgroup> gates_: array<C_x, 256>;
// The block's new states (h', c'), unrounded: [r * BU + u].
var<workgroup> states_: array<vec2<f32>, 64>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n_len = p.n;
    let units = p.h;
    let g = lid / GI;
    let i = lid % GI;
    let mt = (n_len + BM - 1u) / BM;
    let ut = (units + BU - 1u) / BU;
    for (var my = wid.y; my < mt; my += nwg.y) {
        for (var ux = wid.x; ux < ut; ux += nwg.x) {
            let m0 = my * BM + (i / BU) * 4u;
            let u = min(ux * BU + i % BU, units - 1u);
            let ra = vec4<u32>(
                p.h_offset + min(m0, n_len - 1u) * units,
                p.h_offset + min(m0 + 1u, n_len - 1u) * units,
                p.h_offset + min(m0 + 2u, n_len - 1u) * units,
                p.h_offset + min(m0 + 3u, n_len - 1u) * units,
            );
            // W_hh's rows of the unit's gates i, f, g, o.
            let rb = vec4<u32>(p.w_offset + u * units, p.w_offset + (units + u) * units, p.w_offset + (2u * units + u) * units, p.w_offset + (3u * units + u) * units);
            let s = sums_k(ra, rb, g, units);
            let at = (g * GI + i) * 4u;
            sums_[at] = s.r0;
            sums_[at + 1u] = s.r1;
            sums_[at + 2u] = s.r2;
            sums_[at + 3u] = s.r3;
            workgroupBarrier();
            // (row r, unit uu, gate q) of the block: row r % 4 of invocation (r / 4) * BU + uu.
            let r = lid / (BU * 4u);
            let uu = (lid / 4u) % BU;
            let q = lid % 4u;
            let held = ((r / 4u) * BU + uu) * 4u + r % 4u;
            var total = C_x(0);
            for (var k = 0u; k < G; k++) {
                total += sums_[k * GI * 4u + held][q];
            }
            gates_[lid] = load_x(store_x(total));
            workgroupBarrier();
            put_gates_(lid, my * BM, ux * BU);
            if (lid < BM * BU) {
                let cm = min(my * BM + lid / BU, n_len - 1u);
                let cu = min(ux * BU + lid % BU, units - 1u);
                // The gates as the cell's kernel reads x_gates + h_gates, rounded as an add.
                let row = p.xg_offset + cm * 4u * units + cu;
                let base = lid * 4u;
                let pre = vec4<C_x>(
                    load_x(store_x(in_xg_(row) + gates_[base])),
                    load_x(store_x(in_xg_(row + units) + gates_[base + 1u])),
                    load_x(store_x(in_xg_(row + 2u * units) + gates_[base + 2u])),
                    load_x(store_x(in_xg_(row + 3u * units) + gates_[base + 3u])),
                );
                let a = vec4<f32>(sigmoid_(f32(pre.x)), sigmoid_(f32(pre.y)), tanh_(f32(pre.z)), sigmoid_(f32(pre.w)));
                let c_new = a.y * in_c_(p.c_offset + cm * units + cu) + a.x * a.z;
                states_[lid] = vec2<f32>(a.w * tanh_(c_new), c_new);
            }
            if (PACKED) {
                workgroupBarrier();
            }
            put_states_(lid, my * BM, ux * BU);
            // The next block's sums overwrite these.
            workgroupBarrier();
        }
    }
}
