// cast_each.wgsl's conversion from packed bf16 (packed/words.wgsl): element e from its word,
// exactly (bf16 is the top half of an f32).
alias XS = u32;
alias YS = f32;
const PER: u32 = 1u;
const WIDEN: bool = true;

fn out_(word: u32, unused: u32, e: u32, two: bool) -> f32 { return widen_(word, e); }
