// Results, rounded to the dtype.
alias Y = S_x;
fn round_(v: C_x) -> Y { return store_x(v); }
