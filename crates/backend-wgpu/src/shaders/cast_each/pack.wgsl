// cast_each.wgsl's conversion to packed bf16 (packed/words.wgsl): elements e and e + 1
// (where `two`) rounded into one word.
alias XS = S_x;
alias YS = u32;
const PER: u32 = 2u;
const WIDEN: bool = false;

fn out_(v: S_x, w: S_x, e: u32, two: bool) -> u32 {
    let low = narrow_(f32(load_x(v)));
    return select(low, low | (narrow_(f32(load_x(w))) << 16u), two);
}
