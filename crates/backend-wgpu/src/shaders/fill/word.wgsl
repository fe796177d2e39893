// u8 and bool, held in u32 words.
fn value_() -> u32 { return params[1]; }
