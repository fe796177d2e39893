// y written as packed bf16 (packed/words.wgsl) two columns at a time, by matmul_coop.wgsl's
// write_out under PAIRS: with N even, each word is one invocation's alone. col_bias_ is the
// linear layer's bias of column n (zero without one).
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
fn store_y2(i: u32, n: u32, a: C_x, b: C_x) { y[i >> 1u] = narrow2_(round_(a) + col_bias_(n), round_(b) + col_bias_(n + 1u)); }
// Never called: under PAIRS every store is store_y2.
fn store_y(i: u32, v: C_x) {}
