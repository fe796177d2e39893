// No row sums of a beside the product (every product but ops::LinearGrads's, every
// convolution).
fn rows_clear() {}
fn rows_add(s: Slice) {}
fn rows_store(ybase: u32, m0: u32, n0: u32, lid: u32) {}
