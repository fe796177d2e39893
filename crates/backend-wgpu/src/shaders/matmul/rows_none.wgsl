// No row sums of a beside the product (every product but ops::LinearGrads's, every
// convolution).
fn rows_clear() {}
fn rows_add0(v: vec4<C_x>) {}
fn rows_add1(v: vec4<C_x>) {}
fn rows_store(ybase: u32, m0: u32, n0: u32, tx: u32, ty: u32) {}
