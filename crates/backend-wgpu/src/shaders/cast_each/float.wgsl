// cast_each.wgsl's conversion between float types held one element a word (or an f16):
// element e alone.
alias XS = S_x;
alias YS = S_y;
const PER: u32 = 1u;
const WIDEN: bool = false;

fn out_(v: S_x, unused: S_x, e: u32, two: bool) -> S_y { return store_y(C_y(load_x(v))); }
