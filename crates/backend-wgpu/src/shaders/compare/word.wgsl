// u8 and bool, held in u32 words.
fn cmp_(a: u32, b: u32) -> bool {
    switch OP {
        case 0u: { return a == b; }
        // `!=` compiles to an ordered comparison (false for NaN); PyTorch's ne is true there.
        case 1u: { return !(a == b); }
        case 2u: { return a < b; }
        case 3u: { return a <= b; }
        case 4u: { return a > b; }
        default: { return a >= b; }
    }
}
