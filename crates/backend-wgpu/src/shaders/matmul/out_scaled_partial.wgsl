// Partial sums of scaled operands (matmul_coop/scaled.wgsl) over a split of K, scaled back and
// kept in the compute type for the reduction that adds them.
alias Y = C_x;
fn round_(v: C_x) -> Y { return (v * ua_) * ub_; }
