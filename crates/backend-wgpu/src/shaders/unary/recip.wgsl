fn op_(v: C_x) -> C_x { return C_x(1) / v; }
