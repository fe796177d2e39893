// Batched matrix product y[b] = a[b] x b[b] of strided a [B, M, K] and b [B, K, N] into dense
// y [B, M, N]. A workgroup of 16 x 16 invocations computes a BM x BN tile of y, each invocation
// an H x H grid of 4 x 4 blocks lying 64 apart, held in registers (neighbours then read
// neighbouring vec4s of workgroup memory, free of bank conflicts). Each step stages a BK-deep
// slice of a and b in workgroup memory while the next slice is fetched into registers.
//
// With S > 1 splits, K is cut into S ranges of KS: workgroup z = b * S + s computes the partial
// product over range s into y[s, b] in the compute type, and a reduction sums the partials.
// This keeps the GPU busy when M x N alone makes too few tiles (a batch of a few rows).
//
// params: [0] B, [1] M, [2] K, [3] N; a's strides over B, M, K and offset at [4..8]; b's over
// B, K, N and offset at [8..12]; [12] / [13]: whether the scalar loaders of a / b walk along M /
// N rather than K (whichever has the smaller stride, for coalesced reads); [14] S, [15] KS.
//
// Chosen per kernel: the bindings and their fetch_a / fetch_b / store_y functions (vec4 or
// scalar elements; parts from matmul/ before this file), and the constants H and PAD, the tile;
// A_LOAD and B_LOAD, which loaders stage the slices (LOAD_K: a_k_ / b_k_, vec4s along K;
// LOAD_OUTER: a_m_ along M, b_n_ along N; LOAD_STRIDED: a_g_ / b_g_, scalars through any
// strides); OUT4, whether y is written in vec4s; UNROLL, whether the inner loop is unrolled by
// hand.

const LOAD_K: u32 = 0u;
const LOAD_OUTER: u32 = 1u;
const LOAD_STRIDED: u32 = 2u;
const BM: u32 = 64u * H;
const BN: u32 = 64u * H;
const BK: u32 = 16u;
// vec4s of a staged slice per invocation (1 or 2), and per row of workgroup memory (one of
// padding where it fits, to spread the transposing stores of the K-major loaders over banks).
const PV: u32 = BM * BK / 1024u;
const STR: u32 = BM / 4u + PAD;

// Slices stored K-major: as[k * STR + m / 4][m % 4] = a[m0 + m, k0 + k], likewise bs for n.
var<workgroup> as_: array<vec4<C_x>, BK * STR>;
var<workgroup> bs_: array<vec4<C_x>, BK * STR>;


// The end of the K range of the tile being computed; loads past it read zeros.
var<private> kend: u32;
// acc[(hm * H + hn) * 4 + q]: row hm * 64 + ty * 4 + q, columns hn * 64 + tx * 4 + 0..3 of the
// tile. Every index into it is a constant: a loop over it would index registers dynamically,
// which spills them to memory.
var<private> acc: array<vec4<C_x>, 16>;

fn dims_() -> vec4<u32> {
    return vec4<u32>(params[0], params[1], params[2], params[3]);
}

// a, vec4s along K (a row-major [M, K]).
fn a_k_fetch(p: u32, lid: u32, base: u32, m0: u32, k0: u32) -> vec4<C_x> {
    let v = lid + 256u * p;
    let mm = v / (BK / 4u);
    let m = m0 + mm;
    let k = k0 + (v % (BK / 4u)) * 4u;
    if (m < params[1] && k < kend) { return fetch_a4(base + m * params[5] + k); }
    return vec4<C_x>();
}

fn a_k_put(p: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * p;
    let mm = v / (BK / 4u);
    let at = (v % (BK / 4u)) * 4u * STR + mm / 4u;
    let c = mm % 4u;
    as_[at][c] = x.x;
    as_[at + STR][c] = x.y;
    as_[at + 2u * STR][c] = x.z;
    as_[at + 3u * STR][c] = x.w;
}

// a, vec4s along M (a transposed view of a [K, M] matrix).
fn a_m_fetch(p: u32, lid: u32, base: u32, m0: u32, k0: u32) -> vec4<C_x> {
    let v = lid + 256u * p;
    let m = m0 + (v % (BM / 4u)) * 4u;
    let k = k0 + v / (BM / 4u);
    if (m < params[1] && k < kend) { return fetch_a4(base + k * params[6] + m); }
    return vec4<C_x>();
}

fn a_m_put(p: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * p;
    as_[(v / (BM / 4u)) * STR + v % (BM / 4u)] = x;
}

// a, four scalars through any strides; element e of the slice is at (mm, kk).
fn a_g_at(e: u32) -> vec2<u32> {
    if (params[12] != 0u) { return vec2<u32>(e % BM, e / BM); }
    return vec2<u32>(e / BK, e % BK);
}

fn a_g_one(e: u32, base: u32, m0: u32, k0: u32) -> C_x {
    let at = a_g_at(e);
    let m = m0 + at.x;
    let k = k0 + at.y;
    if (m < params[1] && k < kend) { return fetch_a(base + m * params[5] + k * params[6]); }
    return C_x(0);
}

fn a_g_fetch(p: u32, lid: u32, base: u32, m0: u32, k0: u32) -> vec4<C_x> {
    let e = p * 1024u + lid;
    return vec4<C_x>(a_g_one(e, base, m0, k0), a_g_one(e + 256u, base, m0, k0), a_g_one(e + 512u, base, m0, k0), a_g_one(e + 768u, base, m0, k0));
}

fn a_g_put1(e: u32, x: C_x) {
    let at = a_g_at(e);
    as_[at.y * STR + at.x / 4u][at.x % 4u] = x;
}

fn a_g_put(p: u32, lid: u32, x: vec4<C_x>) {
    let e = p * 1024u + lid;
    a_g_put1(e, x.x);
    a_g_put1(e + 256u, x.y);
    a_g_put1(e + 512u, x.z);
    a_g_put1(e + 768u, x.w);
}

// b, vec4s along N (b row-major [K, N]).
fn b_n_fetch(p: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    let v = lid + 256u * p;
    let n = n0 + (v % (BN / 4u)) * 4u;
    let k = k0 + v / (BN / 4u);
    if (n < params[3] && k < kend) { return fetch_b4(base + k * params[9] + n); }
    return vec4<C_x>();
}

fn b_n_put(p: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * p;
    bs_[(v / (BN / 4u)) * STR + v % (BN / 4u)] = x;
}

// b, vec4s along K (a transposed view of an [N, K] matrix, as a linear layer's weight).
fn b_k_fetch(p: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    let v = lid + 256u * p;
    let n = n0 + v / (BK / 4u);
    let k = k0 + (v % (BK / 4u)) * 4u;
    if (n < params[3] && k < kend) { return fetch_b4(base + n * params[10] + k); }
    return vec4<C_x>();
}

fn b_k_put(p: u32, lid: u32, x: vec4<C_x>) {
    let v = lid + 256u * p;
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
    if (params[13] != 0u) { return vec2<u32>(e % BN, e / BN); }
    return vec2<u32>(e / BK, e % BK);
}

fn b_g_one(e: u32, base: u32, n0: u32, k0: u32) -> C_x {
    let at = b_g_at(e);
    let n = n0 + at.x;
    let k = k0 + at.y;
    if (n < params[3] && k < kend) { return fetch_b(base + k * params[9] + n * params[10]); }
    return C_x(0);
}

fn b_g_fetch(p: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    let e = p * 1024u + lid;
    return vec4<C_x>(b_g_one(e, base, n0, k0), b_g_one(e + 256u, base, n0, k0), b_g_one(e + 512u, base, n0, k0), b_g_one(e + 768u, base, n0, k0));
}

fn b_g_put1(e: u32, x: C_x) {
    let at = b_g_at(e);
    bs_[at.y * STR + at.x / 4u][at.x % 4u] = x;
}

fn b_g_put(p: u32, lid: u32, x: vec4<C_x>) {
    let e = p * 1024u + lid;
    b_g_put1(e, x.x);
    b_g_put1(e + 256u, x.y);
    b_g_put1(e + 512u, x.z);
    b_g_put1(e + 768u, x.w);
}

// The loaders A_LOAD and B_LOAD pick (constants: the compiler keeps only the one taken).
fn a_fetch(p: u32, lid: u32, base: u32, m0: u32, k0: u32) -> vec4<C_x> {
    if (A_LOAD == LOAD_K) { return a_k_fetch(p, lid, base, m0, k0); }
    if (A_LOAD == LOAD_OUTER) { return a_m_fetch(p, lid, base, m0, k0); }
    return a_g_fetch(p, lid, base, m0, k0);
}

fn a_put(p: u32, lid: u32, x: vec4<C_x>) {
    if (A_LOAD == LOAD_K) { a_k_put(p, lid, x); } else if (A_LOAD == LOAD_OUTER) { a_m_put(p, lid, x); } else { a_g_put(p, lid, x); }
}

fn b_fetch(p: u32, lid: u32, base: u32, n0: u32, k0: u32) -> vec4<C_x> {
    if (B_LOAD == LOAD_K) { return b_k_fetch(p, lid, base, n0, k0); }
    if (B_LOAD == LOAD_OUTER) { return b_n_fetch(p, lid, base, n0, k0); }
    return b_g_fetch(p, lid, base, n0, k0);
}

fn b_put(p: u32, lid: u32, x: vec4<C_x>) {
    if (B_LOAD == LOAD_K) { b_k_put(p, lid, x); } else if (B_LOAD == LOAD_OUTER) { b_n_put(p, lid, x); } else { b_g_put(p, lid, x); }
}

// Rows m..m+3, columns n..n+3 of y[b] from the four row vectors.
fn store_block(ybase: u32, m: u32, n: u32, r0: vec4<C_x>, r1: vec4<C_x>, r2: vec4<C_x>, r3: vec4<C_x>) {
    store_row(ybase, m, n, r0);
    store_row(ybase, m + 1u, n, r1);
    store_row(ybase, m + 2u, n, r2);
    store_row(ybase, m + 3u, n, r3);
}

fn store_row(ybase: u32, m: u32, n: u32, v: vec4<C_x>) {
    let d = dims_();
    if (m >= d.y || n >= d.w) { return; }
    let at = ybase + m * d.w + n;
    if (OUT4) {
        store_y4(at, v);
    } else {
        store_y(at, v.x);
        if (n + 1u < d.w) { store_y(at + 1u, v.y); }
        if (n + 2u < d.w) { store_y(at + 2u, v.z); }
        if (n + 3u < d.w) { store_y(at + 3u, v.w); }
    }
}

// acc += the outer product of row kk of the staged slices.
fn mac(kk: u32, tx: u32, ty: u32) {
    let a0 = as_[kk * STR + ty];
    let b0 = bs_[kk * STR + tx];
    acc[0] = fma(vec4<C_x>(a0.x), b0, acc[0]);
    acc[1] = fma(vec4<C_x>(a0.y), b0, acc[1]);
    acc[2] = fma(vec4<C_x>(a0.z), b0, acc[2]);
    acc[3] = fma(vec4<C_x>(a0.w), b0, acc[3]);
    if (H == 2u) {
        let a1 = as_[kk * STR + 16u + ty];
        let b1 = bs_[kk * STR + 16u + tx];
        acc[4] = fma(vec4<C_x>(a0.x), b1, acc[4]);
        acc[5] = fma(vec4<C_x>(a0.y), b1, acc[5]);
        acc[6] = fma(vec4<C_x>(a0.z), b1, acc[6]);
        acc[7] = fma(vec4<C_x>(a0.w), b1, acc[7]);
        acc[8] = fma(vec4<C_x>(a1.x), b0, acc[8]);
        acc[9] = fma(vec4<C_x>(a1.y), b0, acc[9]);
        acc[10] = fma(vec4<C_x>(a1.z), b0, acc[10]);
        acc[11] = fma(vec4<C_x>(a1.w), b0, acc[11]);
        acc[12] = fma(vec4<C_x>(a1.x), b1, acc[12]);
        acc[13] = fma(vec4<C_x>(a1.y), b1, acc[13]);
        acc[14] = fma(vec4<C_x>(a1.z), b1, acc[14]);
        acc[15] = fma(vec4<C_x>(a1.w), b1, acc[15]);
    }
}

// One BM x BN tile of y at (m0, n0): the product of a[b] and b[b] over k in [k0, k1), stored
// at y[ybase..].
fn tile(b: u32, m0: u32, n0: u32, k0: u32, k1: u32, ybase: u32, lid: u32) {
    let tx = lid % 16u;
    let ty = lid / 16u;
    let abase = params[7] + b * params[4];
    let bbase = params[11] + b * params[8];
    kend = k1;
    acc = array<vec4<C_x>, 16>();
    var ra0 = a_fetch(0u, lid, abase, m0, k0);
    var rb0 = b_fetch(0u, lid, bbase, n0, k0);
    var ra1 = vec4<C_x>();
    var rb1 = vec4<C_x>();
    if (PV == 2u) {
        ra1 = a_fetch(1u, lid, abase, m0, k0);
        rb1 = b_fetch(1u, lid, bbase, n0, k0);
    }
    for (var k = k0; k < k1; k += BK) {
        workgroupBarrier();
        a_put(0u, lid, ra0);
        b_put(0u, lid, rb0);
        if (PV == 2u) {
            a_put(1u, lid, ra1);
            b_put(1u, lid, rb1);
        }
        workgroupBarrier();
        if (k + BK < k1) {
            ra0 = a_fetch(0u, lid, abase, m0, k + BK);
            rb0 = b_fetch(0u, lid, bbase, n0, k + BK);
            if (PV == 2u) {
                ra1 = a_fetch(1u, lid, abase, m0, k + BK);
                rb1 = b_fetch(1u, lid, bbase, n0, k + BK);
            }
        }
        if (UNROLL) {
            for (var kk = 0u; kk < BK; kk += 4u) {
                mac(kk, tx, ty);
                mac(kk + 1u, tx, ty);
                mac(kk + 2u, tx, ty);
                mac(kk + 3u, tx, ty);
            }
        } else {
            for (var kk = 0u; kk < BK; kk++) {
                mac(kk, tx, ty);
            }
        }
    }
    let m = m0 + ty * 4u;
    let n = n0 + tx * 4u;
    store_block(ybase, m, n, acc[0], acc[1], acc[2], acc[3]);
    if (H == 2u) {
        store_block(ybase, m, n + 64u, acc[4], acc[5], acc[6], acc[7]);
        store_block(ybase, m + 64u, n, acc[8], acc[9], acc[10], acc[11]);
        store_block(ybase, m + 64u, n + 64u, acc[12], acc[13], acc[14], acc[15]);
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Tiles beyond the grid's 65,535 per dimension are taken in turn by the workgroups.
    let d = dims_();
    let splits = params[14];
    let mt = (d.y + BM - 1u) / BM;
    let nt = (d.w + BN - 1u) / BN;
    for (var z = wid.z; z < d.x * splits; z += nwg.z) {
        let b = z / splits;
        let k0 = (z % splits) * params[15];
        let k1 = min(d.z, k0 + params[15]);
        let ybase = ((z % splits) * d.x + b) * d.y * d.w;
        for (var my = wid.y; my < mt; my += nwg.y) {
            for (var nx = wid.x; nx < nt; nx += nwg.x) {
                tile(b, my * BM, nx * BN, k0, k1, ybase, lid);
            }
        }
    }
}
