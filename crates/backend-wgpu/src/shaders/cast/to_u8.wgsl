// Wraps into a byte, as a C cast through int does.
fn convert_(v: S_x) -> u32 { return low_word_(v) & 255u; }
