// u8 and bool, held in u32 words.
fn wide_(v: u32) -> W { return W(v); }
fn low_word_(v: u32) -> u32 { return v; }
