// lstm_step.wgsl's operands as the dtype stores them, and the stores of a block's results.

@group(0) @binding(1) var<storage, read> xg: array<S_x>;
@group(0) @binding(2) var<storage, read> h: array<vec4<S_x>>;
@group(0) @binding(3) var<storage, read> w: array<vec4<S_x>>;
@group(0) @binding(4) var<storage, read> c: array<S_x>;
@group(0) @binding(5) var<storage, read_write> hg: array<S_x>;
@group(0) @binding(6) var<storage, read_write> out: array<S_x>;

// matmul/small_sums.wgsl's operands: a = h, b = W_hh (its [4H, H] rows the [N, K] view).
fn fetch_a4(i: u32) -> vec4<C_x> { return vec4<C_x>(h[i / 4u]); }
fn fetch_b4(i: u32) -> vec4<C_x> { return vec4<C_x>(w[i / 4u]); }
fn in_xg_(j: u32) -> C_x { return load_x(xg[j]); }
fn in_c_(j: u32) -> f32 { return f32(load_x(c[j])); }

// h_gates of the block at row m0, unit u0: invocation lid stores gates_[lid], its (row, unit,
// gate) (lid / (4 BU), (lid / 4) % BU, lid % 4).
fn put_gates_(lid: u32, m0: u32, u0: u32) {
    let m = m0 + lid / (BU * 4u);
    let unit = u0 + (lid / 4u) % BU;
    if (m < p.n && unit < p.h) {
        hg[m * 4u * p.h + (lid % 4u) * p.h + unit] = store_x(gates_[lid]);
    }
}

// The block's h' and c' into out: invocation lid < BM BU stores its own states_[lid].
fn put_states_(lid: u32, m0: u32, u0: u32) {
    let m = m0 + lid / BU;
    let unit = u0 + lid % BU;
    if (lid < BM * BU && m < p.n && unit < p.h) {
        let e = m * p.h + unit;
        out[e] = store_x(states_[lid].x);
        out[p.n * p.h + e] = store_x(states_[lid].y);
    }
}
