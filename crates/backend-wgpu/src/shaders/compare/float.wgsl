fn cmp_(x: S_x, y: S_x) -> bool {
    let a = load_x(x);
    let b = load_x(y);
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
