// Partial sums over a split of K, kept in the compute type for the reduction that adds them.
alias Y = C_x;
fn round_(v: C_x) -> Y { return v; }
