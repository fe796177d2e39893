fn op_(v: C_x) -> C_x { return sqrt(v); }
