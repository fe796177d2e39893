// Row r of this invocation's 6 x 6 element of the 36 products in `prod` (element (r, s) in
// matrix 6 r + s, at place i of p.invocations): columns 0-3 (lo), and 4-5 (hi, in .xy).

fn lo_row(i: u32, r: u32) -> vec4<C_x> {
    let step = p.invocations;
    let at = 6u * r * step + i;
    return vec4<C_x>(load_x(prod[at]), load_x(prod[at + step]), load_x(prod[at + 2u * step]), load_x(prod[at + 3u * step]));
}

fn hi_row(i: u32, r: u32) -> vec4<C_x> {
    let step = p.invocations;
    let at = (6u * r + 4u) * step + i;
    return vec4<C_x>(load_x(prod[at]), load_x(prod[at + step]), C_x(0), C_x(0));
}

fn lo_rows(i: u32) -> Six {
    return Six(lo_row(i, 0u), lo_row(i, 1u), lo_row(i, 2u), lo_row(i, 3u), lo_row(i, 4u), lo_row(i, 5u));
}

fn hi_rows(i: u32) -> Six {
    return Six(hi_row(i, 0u), hi_row(i, 1u), hi_row(i, 2u), hi_row(i, 3u), hi_row(i, 4u), hi_row(i, 5u));
}
