// i64, or f64 held as words: (low, high).
fn value_() -> vec2<u32> { return vec2<u32>(p.value[0], p.value[1]); }
