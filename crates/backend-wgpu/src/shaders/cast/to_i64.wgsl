fn convert_(v: S_x) -> vec2<u32> { return i64_from_float_(trunc(wide_(v))); }
