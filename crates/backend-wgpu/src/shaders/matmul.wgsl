// Batched matrix product y[b] = a[b] x b[b] of strided a [B, M, K] and b [B, K, N] into dense
// y [B, M, N], tiled as matmul/tile.wgsl describes.
//
// With S > 1 splits, K is cut into S ranges of KS: workgroup z = b * S + s computes the partial
// product over range s into y[s, b] in the compute type, and a reduction sums the partials.
// This keeps the GPU busy when M x N alone makes too few tiles (a batch of a few rows).
//
// `MatmulParams` (`matmul.rs`): p.batch = B, p.m, p.k, p.n; a's strides over B, M, K and its
// offset; b's over B, K, N and its offset; p.a_walk_m / p.b_walk_n: whether the scalar loaders
// of a / b walk along M / N rather than K (whichever has the smaller stride, for coalesced
// reads); p.splits = S, p.split_k = KS.
//
// Chosen per kernel: the bindings and their fetch_a / fetch_b / store_y functions (vec4 or
// scalar elements; parts from matmul/ before this file), and the constants H and PAD, the tile;
// A_LOAD and B_LOAD, which loaders stage the slices (LOAD_K: a_k_ / b_k_, vec4s along K;
// LOAD_OUTER: a_m_ along M, b_n_ along N; LOAD_STRIDED: a_g_ / b_g_, scalars through any
// strides); OUT4, whether y is written in vec4s; UNROLL, whether the inner loop is unrolled by
// hand; FETCH_INSIDE, whether slices inside the operands skip the loaders' tests.

// b, vec4s along N (b row-major [K, N]).
fn b_n_fetch(piece: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    let v = lid + 256u * piece;
    let n = n0 + (v % (BN / 4u)) * 4u;
    let k = k0 + v / (BN / 4u);
    if (!edge || (n < p.n && k < kend)) { return fetch_b4(base + k * p.b_stride_k + n); }
    return vec4<C_x>();
}

fn b_n_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * piece;
    bs_[(v / (BN / 4u)) * STR + v % (BN / 4u)] = x;
}

// b, vec4s along K (a transposed view of an [N, K] matrix, as a linear layer's weight).
fn b_k_fetch(piece: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    let v = lid + 256u * piece;
    let n = n0 + v / (BK / 4u);
    let k = k0 + (v % (BK / 4u)) * 4u;
    if (!edge || (n < p.n && k < kend)) { return fetch_b4(base + n * p.b_stride_n + k); }
    return vec4<C_x>();
}

fn b_k_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * piece;
    let nn = v / (BK / 4u);
    let at = (v % (BK / 4u)) * 4u * STR + nn / 4u;
    let c = nn % 4u;
    bs_[at][c] = x.x;
    bs_[at + STR][c] = x.y;
    bs_[at + 2u * STR][c] = x.z;
    bs_[at + 3u * STR][c] = x.w;
}

// b, four scalars through any strides; element e of the slice is at (nn, kk).
fn b_g_at(e: u32) -> vec2<u32> {
    if (p.b_walk_n != 0u) { return vec2<u32>(e % BN, e / BN); }
    return vec2<u32>(e / BK, e % BK);
}

fn b_g_one(e: u32, base: u32, n0: u32, k0: u32) -> C_x {
    let at = b_g_at(e);
    let n = n0 + at.x;
    let k = k0 + at.y;
    if (n < p.n && k < kend) { return fetch_b(base + k * p.b_stride_k + n * p.b_stride_n); }
    return C_x(0);
}

fn b_g_fetch(piece: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    let e = piece * 1024u + lid;
    return vec4<C_x>(b_g_one(e, base, n0, k0), b_g_one(e + 256u, base, n0, k0), b_g_one(e + 512u, base, n0, k0), b_g_one(e + 768u, base, n0, k0));
}

fn b_g_put1(e: u32, x: C_x) {
    let at = b_g_at(e);
    bs_[at.y * STR + at.x / 4u][at.x % 4u] = x;
}

fn b_g_put(piece: u32, lid: u32, x: vec4<C_x>) {
    let e = piece * 1024u + lid;
    b_g_put1(e, x.x);
    b_g_put1(e + 256u, x.y);
    b_g_put1(e + 512u, x.z);
    b_g_put1(e + 768u, x.w);
}

fn b_fetch(piece: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<C_x> {
    if (B_LOAD == LOAD_K) { return b_k_fetch(piece, lid, base, n0, k0, edge); }
    if (B_LOAD == LOAD_OUTER) { return b_n_fetch(piece, lid, base, n0, k0, edge); }
    return b_g_fetch(piece, lid, base, n0, k0);
}

fn b_put(piece: u32, lid: u32, x: vec4<C_x>) {
    if (B_LOAD == LOAD_K) { b_k_put(piece, lid, x); } else if (B_LOAD == LOAD_OUTER) { b_n_put(piece, lid, x); } else { b_g_put(piece, lid, x); }
}
