// WGSL's round() rounds half to even, as torch.round.
fn op_(v: C_x) -> C_x { return round(v); }
