// b of the forward and input-gradient passes on cooperative matrices: the column matrix of
// conv/taps.wgsl, fetched as matmul_coop.wgsl fetches an N-major b (B_LOAD is LOAD_OUTER):
// vec4 i of an invocation's share of a slice is four neighbouring columns of one row. WG is
// a multiple of BN / 4, so an invocation fetches the same four columns in every row it takes,
// and their images and positions are worked out once per tile (begin_tile).

var<private> col0: Col;
var<private> col1: Col;
var<private> col2: Col;
var<private> col3: Col;

fn begin_tile(m0: u32, n0: u32, lid: u32) {
    let j = n0 + (lid % (BN / 4u)) * 4u;
    col0 = column(j);
    col1 = column(j + 1u);
    col2 = column(j + 2u);
    col3 = column(j + 3u);
}

// The product runs here only where the channels per group of the gathered operand and every
// range of K are multiples of BK (conv.rs), so all rows of a slice share one tap. The four
// columns' offsets for it are worked out by the slice's first fetch (i = 0, which fetch()
// makes first) and kept for the other rows: per element, a load and nothing else.
var<private> off0: i32;
var<private> off1: i32;
var<private> off2: i32;
var<private> off3: i32;
var<private> slice_at: u32;

// Column c's element at offset `off` from `at` (a zero where off < 0).
fn pick(c: Col, off: i32, at: u32) -> f16 {
    if (off < 0) { return f16(0.0); }
    return raw_b(at + c.img + u32(off));
}

fn b_fetch(i: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<f16> {
    if (i == 0u) {
        let t = k0 / p.g_channels;
        let ky = t / p.kw;
        let kx = t - ky * p.kw;
        off0 = tap_at(col0, ky, kx);
        off1 = tap_at(col1, ky, kx);
        off2 = tap_at(col2, ky, kx);
        off3 = tap_at(col3, ky, kx);
        slice_at = base + (k0 - t * p.g_channels) * p.g_channel_stride;
    }
    let k = k0 + (lid + WG * i) / (BN / 4u);
    if (edge && k >= kend) { return vec4<f16>(); }
    let at = slice_at + (k - k0) * p.g_channel_stride;
    return vec4<f16>(pick(col0, off0, at), pick(col1, off1, at), pick(col2, off2, at), pick(col3, off3, at));
}
