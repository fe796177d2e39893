fn wide_(v: S_x) -> W { return W(load_x(v)); }
// Truncated toward zero, as a C cast through int.
fn low_word_(v: S_x) -> u32 { return bitcast<u32>(i32(trunc(wide_(v)))); }
