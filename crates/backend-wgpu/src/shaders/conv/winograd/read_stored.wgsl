// A pass's operand read as stored (f32, or f16 widened): `A_t` is its element, `SHIFT_T` 0.
alias A_t = S_t;
const SHIFT_T: u32 = 0u;

// Element e's value, from the array element at e >> SHIFT_T.
fn read_t(v: A_t, e: u32) -> C_x {
    return load_t(v);
}
