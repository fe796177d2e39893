// The loaders of a plain strided a [M, K] (matmul's lhs, conv's weights): A_LOAD picks one.
// p.m, p.a_stride_m / p.a_stride_k, p.a_walk_m: whether the scalar loader walks along M rather
// than K. Uses kend and the slice layout of matmul/tile.wgsl.

const LOAD_K: u32 = 0u;
const LOAD_OUTER: u32 = 1u;
const LOAD_STRIDED: u32 = 2u;

// a, vec4s along K (a row-major [M, K]).
fn a_k_fetch(piece: u32, lid: u32, base: u32, m0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    let v = lid + 256u * piece;
    let mm = v / (BK / 4u);
    let m = m0 + mm;
    let k = k0 + (v % (BK / 4u)) * 4u;
    if (!edge || (m < p.m && k < kend)) { return fetch_a4(base + m * p.a_stride_m + k); }
    return vec4<C_x>();
}

fn a_k_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * piece;
    let mm = v / (BK / 4u);
    let at = (v % (BK / 4u)) * 4u * STR + mm / 4u;
    let c = mm % 4u;
    as_[at][c] = x.x;
    as_[at + STR][c] = x.y;
    as_[at + 2u * STR][c] = x.z;
    as_[at + 3u * STR][c] = x.w;
}

// a, vec4s along M (a transposed view of a [K, M] matrix).
fn a_m_fetch(piece: u32, lid: u32, base: u32, m0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    let v = lid + 256u * piece;
    let m = m0 + (v % (BM / 4u)) * 4u;
    let k = k0 + v / (BM / 4u);
    if (!edge || (m < p.m && k < kend)) { return fetch_a4(base + k * p.a_stride_k + m); }
    return vec4<C_x>();
}

fn a_m_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * piece;
    as_[(v / (BM / 4u)) * STR + v % (BM / 4u)] = x;
}

// a, four scalars through any strides; element e of the slice is at (mm, kk).
fn a_g_at(e: u32) -> vec2<u32> {
    if (p.a_walk_m != 0u) { return vec2<u32>(e % BM, e / BM); }
    return vec2<u32>(e / BK, e % BK);
}

fn a_g_one(e: u32, base: u32, m0: u32, k0: u32) -> C_x {
    let at = a_g_at(e);
    let m = m0 + at.x;
    let k = k0 + at.y;
    if (m < p.m && k < kend) { return fetch_a(base + m * p.a_stride_m + k * p.a_stride_k); }
    return C_x(0);
}

fn a_g_fetch(piece: u32, lid: u32, base: u32, m0: u32, k0: u32) -> vec4<C_x> {
    let e = piece * 1024u + lid;
    return vec4<C_x>(a_g_one(e, base, m0, k0), a_g_one(e + 256u, base, m0, k0), a_g_one(e + 512u, base, m0, k0), a_g_one(e + 768u, base, m0, k0));
}

fn a_g_put1(e: u32, x: C_x) {
    let at = a_g_at(e);
    as_[at.y * STR + at.x / 4u][at.x % 4u] = x;
}

fn a_g_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let e = piece * 1024u + lid;
    a_g_put1(e, x.x);
    a_g_put1(e + 256u, x.y);
    a_g_put1(e + 512u, x.z);
    a_g_put1(e + 768u, x.w);
}

// The loaders A_LOAD and B_LOAD pick (constants: the compiler keeps only the one taken). Without
// `edge` the slice lies inside the operand (tile.wgsl's fetch_slice says so) and the vec4
// loaders test nothing; the scalar ones always test.
fn a_fetch(piece: u32, lid: u32, base: u32, m0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    if (A_LOAD == LOAD_K) { return a_k_fetch(piece, lid, base, m0, k0, edge); }
    if (A_LOAD == LOAD_OUTER) { return a_m_fetch(piece, lid, base, m0, k0, edge); }
    return a_g_fetch(piece, lid, base, m0, k0);
}

fn a_put(piece: u32, lid: u32, x: vec4<C_x>) {
    if (A_LOAD == LOAD_K) { a_k_put(piece, lid, x); } else if (A_LOAD == LOAD_OUTER) { a_m_put(piece, lid, x); } else { a_g_put(piece, lid, x); }
}
