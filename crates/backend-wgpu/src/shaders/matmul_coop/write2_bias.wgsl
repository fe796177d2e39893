// y as stored (f16) two columns at a time, by matmul_coop.wgsl's write_out under PAIRS (N even),
// a linear layer's bias of each column added before the one rounding, as the ordinary kernels'
// epilogue adds it (ops::MatmulBias; p.bias_offset is the bias's offset, binding 4).
@group(0) @binding(3) var<storage, read_write> y: array<Y>;
@group(0) @binding(4) var<storage, read> bias_: array<S_x>;
fn bias_at_(n: u32) -> C_x { return load_x(bias_[p.bias_offset + n]); }
fn store_y2(i: u32, n: u32, a: C_x, b: C_x) {
    y[i] = round_(a + bias_at_(n));
    y[i + 1u] = round_(b + bias_at_(n + 1u));
}
// Never called: under PAIRS every store is store_y2.
fn store_y(i: u32, v: C_x) {}
