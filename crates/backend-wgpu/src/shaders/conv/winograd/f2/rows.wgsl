// Row r of this invocation's 4 x 4 element Mt of the 16 products in `prod` (element (r, s) in
// matrix 4 r + s, at place i of p.invocations): F(2x2)'s output transforms read them so.

fn mt_row(i: u32, r: u32) -> vec4<C_x> {
    let step = p.invocations;
    let at = 4u * r * step + i;
    return vec4<C_x>(load_x(prod[at]), load_x(prod[at + step]), load_x(prod[at + 2u * step]), load_x(prod[at + 3u * step]));
}
