// Sums of scaled operands (matmul_coop/scaled.wgsl), scaled back and rounded to the dtype as
// they are stored.
alias Y = S_x;
fn round_(v: C_x) -> Y { return store_x((v * ua_) * ub_); }
