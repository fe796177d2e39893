// The tiled product of an M x K operand a and a K x N operand b into y, shared by matmul.wgsl
// and conv.wgsl. A workgroup of 16 x 16 invocations computes a BM x BN tile of y, each
// invocation an H x H grid of 4 x 4 blocks lying 64 apart, held in registers (neighbours then
// read neighbouring vec4s of workgroup memory, free of bank conflicts). Each step stages a
// BK-deep slice of a and b in workgroup memory while the next slice is fetched into registers.
//
// The including shader provides the loaders (a_fetch / a_put, b_fetch / b_put: PV vec4s of a
// slice per invocation, fetched into registers and then put into as_ / bs_), begin_tile (the
// loaders' set-up for a tile, before its first fetch), out_at (where element (m, n) of the
// tile's output goes; OUT4 needs four consecutive n at four consecutive places, the first
// a multiple of 4), epilogue (what the sums of row m, columns n..n+3 become before they are
// stored: a convolution's bias by row, a linear layer's by column; matmul/no_bias.wgsl where
// there is none), store_y / store_y4 (from matmul/write*.wgsl), and the constants H, PAD,
// OUT4, UNROLL and FETCH_INSIDE. p.m and p.n are M and N.

// Invocations per workgroup (16 x 16), for an including shader's entry point.
const WG: u32 = 256u;
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
    return vec4<u32>(p.batch, p.m, p.k, p.n);
}

// Rows m..m+3, columns n..n+3 of y[b] from the four row vectors.
fn store_block(ybase: u32, m: u32, n: u32, r0: vec4<C_x>, r1: vec4<C_x>, r2: vec4<C_x>, r3: vec4<C_x>) {
    store_row(ybase, m, n, r0);
    store_row(ybase, m + 1u, n, r1);
    store_row(ybase, m + 2u, n, r2);
    store_row(ybase, m + 3u, n, r3);
}

fn store_row(ybase: u32, m: u32, n: u32, sums: vec4<C_x>) {
    let d = dims_();
    if (m >= d.y || n >= d.w) { return; }
    let at = out_at(ybase, m, n);
    let v = epilogue(m, n, sums);
    if (OUT4) {
        store_y4(at, v);
    } else {
        // Neighbouring columns need not be neighbours in y (a convolution's next image).
        store_y(at, v.x);
        if (n + 1u < d.w) { store_y(out_at(ybase, m, n + 1u), v.y); }
        if (n + 2u < d.w) { store_y(out_at(ybase, m, n + 2u), v.z); }
        if (n + 3u < d.w) { store_y(out_at(ybase, m, n + 3u), v.w); }
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

// This invocation's share of the slices of a and b at k0 (PV vec4s of each).
struct Slice {
    a0: vec4<C_x>,
    b0: vec4<C_x>,
    a1: vec4<C_x>,
    b1: vec4<C_x>,
}

// The slices at k0. With FETCH_INSIDE, one that lies inside both operands (the tile inside y,
// the slice inside [.., k1)) is fetched without a test per element: `edge` is a constant in
// each call, so each call's loaders are compiled with or without their tests (f32 matmul
// 4096^3 3-6% faster on the H200; the convolutions leave it off).
fn fetch_slice(abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, k1: u32, lid: u32) -> Slice {
    let d = dims_();
    if (FETCH_INSIDE & (m0 + BM <= d.y) & (n0 + BN <= d.w) & (k0 + BK <= k1)) {
        return fetch_slice_as(abase, bbase, m0, n0, k0, lid, false);
    }
    return fetch_slice_as(abase, bbase, m0, n0, k0, lid, true);
}

fn fetch_slice_as(abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, lid: u32, edge: bool) -> Slice {
    var s = Slice(a_fetch(0u, lid, abase, m0, k0, edge), b_fetch(0u, lid, bbase, n0, k0, edge), vec4<C_x>(), vec4<C_x>());
    if (PV == 2u) {
        s.a1 = a_fetch(1u, lid, abase, m0, k0, edge);
        s.b1 = b_fetch(1u, lid, bbase, n0, k0, edge);
    }
    return s;
}

// One BM x BN tile of y at (m0, n0): the product over k in [k0, k1) of the operands whose
// loaders start at abase and bbase, stored through out_at(ybase, ..).
fn tile(abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, k1: u32, ybase: u32, lid: u32) {
    let tx = lid % 16u;
    let ty = lid / 16u;
    kend = k1;
    begin_tile(m0, n0, lid);
    acc = array<vec4<C_x>, 16>();
    var r = fetch_slice(abase, bbase, m0, n0, k0, k1, lid);
    for (var k = k0; k < k1; k += BK) {
        workgroupBarrier();
        a_put(0u, lid, r.a0);
        b_put(0u, lid, r.b0);
        if (PV == 2u) {
            a_put(1u, lid, r.a1);
            b_put(1u, lid, r.b1);
        }
        workgroupBarrier();
        if (k + BK < k1) {
            r = fetch_slice(abase, bbase, m0, n0, k + BK, k1, lid);
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
