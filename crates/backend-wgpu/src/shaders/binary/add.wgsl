fn op_(a: C_x, b: C_x) -> C_x { return a + b; }
