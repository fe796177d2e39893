// No row sums of a beside the product (every product on cooperative matrices but a wide
// ops::LinearGrads's, every convolution).
fn rows_clear() {}
fn rows_add(x: vec4<f16>) {}
fn rows_store(ybase: u32, m0: u32, n0: u32, lid: u32) {}
