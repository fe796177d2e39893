// Sums of scaled operands (matmul_coop/scaled.wgsl), scaled back as they are stored, in f32
// (finished or partial).
alias Y = C_x;
fn round_(v: C_x) -> Y { return (v * ua_) * ub_; }
