// u8 and bool, held in u32 words.
fn value_() -> u32 { return p.value[0]; }
