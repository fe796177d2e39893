// A pass's operand of packed bf16 (`packed.rs`, `words.wgsl`): two elements a word, so
// element e sits in word e >> SHIFT_T.
alias A_t = u32;
const SHIFT_T: u32 = 1u;

// Element e's value, from its word.
fn read_t(v: A_t, e: u32) -> C_x {
    return C_x(widen_(v, e));
}
