// lstm_step.wgsl's operands as packed bf16 (words.wgsl), and the stores of a block's results
// a word (two neighbouring units) at a time, from workgroup memory. H is a multiple of 4, so
// a pair never crosses a row's end and each starts on a word.

@group(0) @binding(1) var<storage, read> xg: array<u32>;
@group(0) @binding(2) var<storage, read> h: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> w: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> c: array<u32>;
@group(0) @binding(5) var<storage, read_write> hg: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<u32>;

// matmul/small_sums.wgsl's operands: a = h, b = W_hh (its [4H, H] rows the [N, K] view).
fn fetch_a4(i: u32) -> vec4<C_x> { return widen4_(h[i / 4u]); }
fn fetch_b4(i: u32) -> vec4<C_x> { return widen4_(w[i / 4u]); }
fn in_xg_(j: u32) -> C_x { return widen_(xg[j >> 1u], j); }
fn in_c_(j: u32) -> f32 { return widen_(c[j >> 1u], j); }

// h_gates of the block at row m0, unit u0: invocation lid < 2 BM BU stores the word of
// (row lid / (2 BU), gate (lid / (BU / 2)) % 4, units 2v and 2v + 1 for v = lid % (BU / 2)).
fn put_gates_(lid: u32, m0: u32, u0: u32) {
    let r = lid / (BU * 2u);
    let q = (lid / (BU / 2u)) % 4u;
    let v = lid % (BU / 2u);
    let m = m0 + r;
    let unit = u0 + 2u * v;
    if (lid < BM * BU * 2u && m < p.n && unit < p.h) {
        let at = (r * BU + 2u * v) * 4u + q;
        hg[(m * 4u * p.h + q * p.h + unit) / 2u] = narrow2_(gates_[at], gates_[at + 4u]);
    }
}

// The block's h' and c' into out: invocation lid < BM BU / 2 stores the words of (row
// lid / (BU / 2), units 2v and 2v + 1 for v = lid % (BU / 2)).
fn put_states_(lid: u32, m0: u32, u0: u32) {
    let r = lid / (BU / 2u);
    let v = lid % (BU / 2u);
    let m = m0 + r;
    let unit = u0 + 2u * v;
    if (lid < BM * BU / 2u && m < p.n && unit < p.h) {
        let at = r * BU + 2u * v;
        let e = m * p.h + unit;
        out[e / 2u] = narrow2_(states_[at].x, states_[at + 1u].x);
        out[(p.n * p.h + e) / 2u] = narrow2_(states_[at].y, states_[at + 1u].y);
    }
}
