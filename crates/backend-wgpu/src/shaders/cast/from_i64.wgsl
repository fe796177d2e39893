fn wide_(v: vec2<u32>) -> W { return i64_to_float_(v); }
fn low_word_(v: vec2<u32>) -> u32 { return v.x; }
