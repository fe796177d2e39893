// Batched matrix product y[b] = a[b] x b[b] of f16 operands (or f32 and bf16 ones scaled into
// f16, matmul_coop/scaled.wgsl) on cooperative matrices (tensor cores): f16 x f16 products
// summed in f32, rounded to the dtype on store, or kept in f32 as partial sums over a split of
// K. Bindings, params and grid are matmul.wgsl's; so is the entry point
// of a matrix product (matmul/entry.wgsl). A convolution (conv.rs) runs this kernel with
// conv.wgsl's entry point and out_at, and conv/gather_coop.wgsl's b loader.
//
// A workgroup is SGM x SGN subgroups of exactly 32 invocations (the Rust side picks these
// kernels only where subgroups are 32 wide, so subgroup s is invocations 32s..32s+31); subgroup
// s computes the 16 FM x 64 block (s / SGN, s % SGN) of the BM x BN tile as FM x 4 cooperative
// 16 x 16 sums (FM = 4, or 2 for half the registers: rows 32..63 of the block are skipped by
// tests of the constant FM, which the compiler folds away).
// - Each 32-deep slice of a and b is fetched from global memory into registers while the
//   tensor cores work on the previous one in workgroup memory, so a slice costs one barrier
//   pair and its memory latency hides behind the products.
// - Slices are staged in the operand's own orientation (a K-major operand as rows along K, an
//   M- or N-major one as rows along M or N), so every vec4 loader stores whole vec4s, and the
//   cooperative load reads the staged slice row- or column-major to match. Rows are padded by
//   8 f16 so that the 8 rows a tensor-core load reads at once fall on different banks.
// - Partial sums (f32) are stored straight from the cooperative matrices where every tile lies
//   inside y.
//
// Cooperative ops must be reached by the whole subgroup at once: every branch before one is on
// a constant or on params (see whole_tiles), every loop bound the workgroup's. Every index and
// stride handed to a cooperative load or store is a `let` of its own.
//
// Chosen per kernel: SGM, SGN, FM; A_LOAD and B_LOAD (as matmul.wgsl's); A_VECS and B_VECS,
// the vec4s of workgroup memory the staged slices need; raw_a / raw_a4 / raw_b / raw_b4
// (matmul_coop/raw_*.wgsl), STORE_DIRECT, store_frag and scale_operands (the set-up of f32
// or bf16 operands scaled into f16, matmul_coop/scaled.wgsl; a no-op in
// matmul_coop/store_*.wgsl); PAIRS (sums stored two columns an invocation through store_y2, as
// packed bf16 wants, matmul_coop/write2_packed.wgsl; else one through store_y);
// a_fetch and b_fetch (vec4 i of this invocation's share of a slice of a or b, zeros outside:
// matmul_coop/a_fetch.wgsl and b_fetch.wgsl, or a convolution's loaders in conv/), begin_tile
// (their set-up for a tile), out_at (where element (m, n) of y goes) and finish_ (what the
// sum of row m becomes as the scalar stores take it: itself, matmul_coop/as_is.wgsl, or a
// convolution's with its bias and ReLU, conv/bias_coop.wgsl); the rows_ functions (a's row
// sums beside the product, matmul_coop/rows.wgsl, or none, matmul_coop/rows_none.wgsl).

const LOAD_K: u32 = 0u;
const LOAD_OUTER: u32 = 1u;
const LOAD_STRIDED: u32 = 2u;

const WG: u32 = 32u * SGM * SGN;
const BM: u32 = 16u * FM * SGM;
const BN: u32 = 64u * SGN;
const BK: u32 = 32u;
// Row strides of the staged slices in vec4s of f16: rows along K (a as M x K, b as N x K),
// rows along M (a as K x M) and rows along N (b as K x N); 16-byte aligned, as the loads want.
const KROW: u32 = (BK + 8u) / 4u;
const MROW: u32 = (BM + 8u) / 4u;
const NROW: u32 = (BN + 8u) / 4u;
// vec4s of a's and b's slices each invocation fetches (2, 4 or 8: the fetches are written out).
const PA: u32 = BM * BK / 4u / WG;
const PB: u32 = BN * BK / 4u / WG;

var<workgroup> as_: array<vec4<f16>, A_VECS>;
var<workgroup> bs_: array<vec4<f16>, B_VECS>;
// One 16 x 16 f32 scratch per subgroup for the sums on their way out.
var<workgroup> cs_: array<f32, 256u * SGM * SGN>;

// The end of the K range of the tile being computed; loads past it read zeros.
var<private> kend: u32;
// The next slice, fetched ahead. Every index into them is a constant (a dynamic one would put
// them in memory).
var<private> ra: array<vec4<f16>, 8>;
var<private> rb: array<vec4<f16>, 8>;

fn dims_() -> vec4<u32> {
    return vec4<u32>(p.batch, p.m, p.k, p.n);
}

// a_put stores vec4 i of a's slice (a_fetch's) where the staged orientation keeps it.
fn a_put(i: u32, lid: u32, x: vec4<f16>) {
    let v = lid + WG * i;
    if (A_LOAD == LOAD_K) {
        as_[(v / (BK / 4u)) * KROW + v % (BK / 4u)] = x;
    } else {
        as_[(v / (BM / 4u)) * MROW + v % (BM / 4u)] = x;
    }
}

// a's slice at k0 through any strides, staged as M x K (no prefetch: scalars would take too
// many registers), neighbouring invocations reading neighbouring elements.
fn a_stage_strided(lid: u32, base: u32, m0: u32, k0: u32) {
    for (var i = 0u; i < BM * BK / WG; i++) {
        let e = lid + WG * i;
        var at = vec2<u32>(e / BK, e % BK);
        if (p.a_walk_m != 0u) { at = vec2<u32>(e % BM, e / BM); }
        var x = f16(0.0);
        if (m0 + at.x < p.m && k0 + at.y < kend) { x = raw_a(base + (m0 + at.x) * p.a_stride_m + (k0 + at.y) * p.a_stride_k); }
        as_[at.x * KROW + at.y / 4u][at.y % 4u] = x;
    }
}

fn b_put(i: u32, lid: u32, x: vec4<f16>) {
    let v = lid + WG * i;
    if (B_LOAD == LOAD_K) {
        bs_[(v / (BK / 4u)) * KROW + v % (BK / 4u)] = x;
    } else {
        bs_[(v / (BN / 4u)) * NROW + v % (BN / 4u)] = x;
    }
}

// b's slice at k0 through any strides, staged as K x N.
fn b_stage_strided(lid: u32, base: u32, n0: u32, k0: u32) {
    for (var i = 0u; i < BN * BK / WG; i++) {
        let e = lid + WG * i;
        var at = vec2<u32>(e / BK, e % BK);
        if (p.b_walk_n != 0u) { at = vec2<u32>(e % BN, e / BN); }
        var x = f16(0.0);
        if (n0 + at.x < p.n && k0 + at.y < kend) { x = raw_b(base + (k0 + at.y) * p.b_stride_k + (n0 + at.x) * p.b_stride_n); }
        bs_[at.y * NROW + at.x / 4u][at.x % 4u] = x;
    }
}

// The slices at k0 of the vec4-read operands into registers. A slice that lies inside both
// operands (the tile inside y, the slice inside K) is fetched without a test per element: so a
// 4096^3 product ran 1.13-1.15x as fast on the H100 and 1.26-1.39x on the H200. `edge` is a
// constant in each call, so each call's loaders
// are compiled with or without their tests.
fn fetch(lid: u32, abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32) {
    let d = dims_();
    if ((m0 + BM <= d.y) & (n0 + BN <= d.w) & (k0 + BK <= kend)) {
        fetch_slices(lid, abase, bbase, m0, n0, k0, false);
    } else {
        fetch_slices(lid, abase, bbase, m0, n0, k0, true);
    }
}

fn fetch_slices(lid: u32, abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, edge: bool) {
    if (A_LOAD != LOAD_STRIDED) {
        ra[0] = a_fetch(0u, lid, abase, m0, k0, edge);
        ra[1] = a_fetch(1u, lid, abase, m0, k0, edge);
        if (PA >= 4u) {
            ra[2] = a_fetch(2u, lid, abase, m0, k0, edge);
            ra[3] = a_fetch(3u, lid, abase, m0, k0, edge);
        }
        if (PA == 8u) {
            ra[4] = a_fetch(4u, lid, abase, m0, k0, edge);
            ra[5] = a_fetch(5u, lid, abase, m0, k0, edge);
            ra[6] = a_fetch(6u, lid, abase, m0, k0, edge);
            ra[7] = a_fetch(7u, lid, abase, m0, k0, edge);
        }
    }
    if (B_LOAD != LOAD_STRIDED) {
        rb[0] = b_fetch(0u, lid, bbase, n0, k0, edge);
        rb[1] = b_fetch(1u, lid, bbase, n0, k0, edge);
        if (PB >= 4u) {
            rb[2] = b_fetch(2u, lid, bbase, n0, k0, edge);
            rb[3] = b_fetch(3u, lid, bbase, n0, k0, edge);
        }
        if (PB == 8u) {
            rb[4] = b_fetch(4u, lid, bbase, n0, k0, edge);
            rb[5] = b_fetch(5u, lid, bbase, n0, k0, edge);
            rb[6] = b_fetch(6u, lid, bbase, n0, k0, edge);
            rb[7] = b_fetch(7u, lid, bbase, n0, k0, edge);
        }
    }
}

// The slices at k0 into workgroup memory: the fetched registers, or the strided operands read now.
fn put(lid: u32, abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32) {
    if (A_LOAD == LOAD_STRIDED) {
        a_stage_strided(lid, abase, m0, k0);
    } else {
        a_put(0u, lid, ra[0]);
        a_put(1u, lid, ra[1]);
        rows_add(ra[0]);
        rows_add(ra[1]);
        if (PA >= 4u) {
            a_put(2u, lid, ra[2]);
            a_put(3u, lid, ra[3]);
            rows_add(ra[2]);
            rows_add(ra[3]);
        }
        if (PA == 8u) {
            a_put(4u, lid, ra[4]);
            a_put(5u, lid, ra[5]);
            a_put(6u, lid, ra[6]);
            a_put(7u, lid, ra[7]);
            rows_add(ra[4]);
            rows_add(ra[5]);
            rows_add(ra[6]);
            rows_add(ra[7]);
        }
    }
    if (B_LOAD == LOAD_STRIDED) {
        b_stage_strided(lid, bbase, n0, k0);
    } else {
        b_put(0u, lid, rb[0]);
        b_put(1u, lid, rb[1]);
        if (PB >= 4u) {
            b_put(2u, lid, rb[2]);
            b_put(3u, lid, rb[3]);
        }
        if (PB == 8u) {
            b_put(4u, lid, rb[4]);
            b_put(5u, lid, rb[5]);
            b_put(6u, lid, rb[6]);
            b_put(7u, lid, rb[7]);
        }
    }
}

// The 16 x 16 block at rows mi.., depth kk.. of a's staged slice.
fn frag_a(mi: u32, kk: u32) -> coop_mat16x16<f16, A> {
    if (A_LOAD == LOAD_OUTER) {
        let at = kk * MROW + mi / 4u;
        let s = MROW;
        return coopLoad<coop_mat16x16<f16, A>>(&as_[at], s);
    }
    let at = mi * KROW + kk / 4u;
    let s = KROW;
    return coopLoadT<coop_mat16x16<f16, A>>(&as_[at], s);
}

// The 16 x 16 block at depth kk.., columns nj.. of b's staged slice.
fn frag_b(nj: u32, kk: u32) -> coop_mat16x16<f16, B> {
    if (B_LOAD == LOAD_K) {
        let at = nj * KROW + kk / 4u;
        let s = KROW;
        return coopLoad<coop_mat16x16<f16, B>>(&bs_[at], s);
    }
    let at = kk * NROW + nj / 4u;
    let s = NROW;
    return coopLoadT<coop_mat16x16<f16, B>>(&bs_[at], s);
}

// The 16 x 16 sum the subgroup has just stored in its scratch into rows m.., columns n.. of y
// (those inside it). Every invocation of the workgroup calls this at the same point (it holds
// barriers: the first makes the scratch visible, the second frees it for the next sum).
fn write_out(ybase: u32, m: u32, n: u32, lid: u32) {
    workgroupBarrier();
    let at = (lid / 32u) * 256u;
    let d = dims_();
    if (PAIRS) {
        // Two neighbouring columns an invocation (N even: both inside y or neither).
        for (var i = lid % 32u; i < 128u; i += 32u) {
            let mm = m + i / 8u;
            let nn = n + (i % 8u) * 2u;
            if (mm < d.y && nn < d.w) { store_y2(out_at(ybase, mm, nn), nn, cs_[at + 2u * i], cs_[at + 2u * i + 1u]); }
        }
    } else {
        for (var i = lid % 32u; i < 256u; i += 32u) {
            let mm = m + i / 16u;
            let nn = n + i % 16u;
            if (mm < d.y && nn < d.w) { store_y(out_at(ybase, mm, nn), finish_(mm, cs_[at + i])); }
        }
    }
    workgroupBarrier();
}

// Whether every tile lies inside y. Branches around cooperative ops test only params and
// constants, with `&` rather than `&&`: naga counts function arguments and local variables
// (what a short-circuit becomes) as non-uniform, so it rejects a test of the tile's position.
fn whole_tiles() -> bool {
    return (p.m % BM == 0u) & (p.n % BN == 0u);
}

// One BM x BN tile of y at (m0, n0): the product over k in [k0, k1) of the operands whose
// elements start at abase and bbase, stored through out_at(ybase, ..).
fn tile(abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, k1: u32, ybase: u32, lid: u32) {
    kend = k1;
    scale_operands();
    begin_tile(m0, n0, lid);
    rows_clear();
    let sg = lid / 32u;
    // The subgroup's block: rows wm.., columns wn.. of the tile.
    let wm = (sg / SGN) * 16u * FM;
    let wn = (sg % SGN) * 64u;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c02 = coop_mat16x16<f32, C>();
    var c03 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    var c12 = coop_mat16x16<f32, C>();
    var c13 = coop_mat16x16<f32, C>();
    var c20 = coop_mat16x16<f32, C>();
    var c21 = coop_mat16x16<f32, C>();
    var c22 = coop_mat16x16<f32, C>();
    var c23 = coop_mat16x16<f32, C>();
    var c30 = coop_mat16x16<f32, C>();
    var c31 = coop_mat16x16<f32, C>();
    var c32 = coop_mat16x16<f32, C>();
    var c33 = coop_mat16x16<f32, C>();
    fetch(lid, abase, bbase, m0, n0, k0);
    // 16 deep per step; every other step stages the next slice.
    for (var k = k0; k < k1; k += 16u) {
        let kk = (k - k0) % BK;
        if (kk == 0u) {
            // The previous slice's loads are done before it is overwritten.
            workgroupBarrier();
            put(lid, abase, bbase, m0, n0, k);
            workgroupBarrier();
            if (k + BK < k1) { fetch(lid, abase, bbase, m0, n0, k + BK); }
        }
        let a0 = frag_a(wm, kk);
        let a1 = frag_a(wm + 16u, kk);
        var a2 = coop_mat16x16<f16, A>();
        var a3 = coop_mat16x16<f16, A>();
        if (FM == 4u) {
            a2 = frag_a(wm + 32u, kk);
            a3 = frag_a(wm + 48u, kk);
        }
        let b0 = frag_b(wn, kk);
        let b1 = frag_b(wn + 16u, kk);
        let b2 = frag_b(wn + 32u, kk);
        let b3 = frag_b(wn + 48u, kk);
        c00 = coopMultiplyAdd(a0, b0, c00);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c02 = coopMultiplyAdd(a0, b2, c02);
        c03 = coopMultiplyAdd(a0, b3, c03);
        c10 = coopMultiplyAdd(a1, b0, c10);
        c11 = coopMultiplyAdd(a1, b1, c11);
        c12 = coopMultiplyAdd(a1, b2, c12);
        c13 = coopMultiplyAdd(a1, b3, c13);
        if (FM == 4u) {
            c20 = coopMultiplyAdd(a2, b0, c20);
            c21 = coopMultiplyAdd(a2, b1, c21);
            c22 = coopMultiplyAdd(a2, b2, c22);
            c23 = coopMultiplyAdd(a2, b3, c23);
            c30 = coopMultiplyAdd(a3, b0, c30);
            c31 = coopMultiplyAdd(a3, b1, c31);
            c32 = coopMultiplyAdd(a3, b2, c32);
            c33 = coopMultiplyAdd(a3, b3, c33);
        }
    }
    rows_store(ybase, m0, n0, lid);
    let m = m0 + wm;
    let n = n0 + wn;
    if (STORE_DIRECT & whole_tiles()) {
        store_frag(c00, out_at(ybase, m, n));
        store_frag(c01, out_at(ybase, m, n + 16u));
        store_frag(c02, out_at(ybase, m, n + 32u));
        store_frag(c03, out_at(ybase, m, n + 48u));
        store_frag(c10, out_at(ybase, m + 16u, n));
        store_frag(c11, out_at(ybase, m + 16u, n + 16u));
        store_frag(c12, out_at(ybase, m + 16u, n + 32u));
        store_frag(c13, out_at(ybase, m + 16u, n + 48u));
        if (FM == 4u) {
            store_frag(c20, out_at(ybase, m + 32u, n));
            store_frag(c21, out_at(ybase, m + 32u, n + 16u));
            store_frag(c22, out_at(ybase, m + 32u, n + 32u));
            store_frag(c23, out_at(ybase, m + 32u, n + 48u));
            store_frag(c30, out_at(ybase, m + 48u, n));
            store_frag(c31, out_at(ybase, m + 48u, n + 16u));
            store_frag(c32, out_at(ybase, m + 48u, n + 32u));
            store_frag(c33, out_at(ybase, m + 48u, n + 48u));
        }
        return;
    }
    // The subgroup's scratch, and its row stride.
    let cat = sg * 256u;
    let s16 = 16u;
    coopStoreT(c00, &cs_[cat], s16);
    write_out(ybase, m, n, lid);
    coopStoreT(c01, &cs_[cat], s16);
    write_out(ybase, m, n + 16u, lid);
    coopStoreT(c02, &cs_[cat], s16);
    write_out(ybase, m, n + 32u, lid);
    coopStoreT(c03, &cs_[cat], s16);
    write_out(ybase, m, n + 48u, lid);
    coopStoreT(c10, &cs_[cat], s16);
    write_out(ybase, m + 16u, n, lid);
    coopStoreT(c11, &cs_[cat], s16);
    write_out(ybase, m + 16u, n + 16u, lid);
    coopStoreT(c12, &cs_[cat], s16);
    write_out(ybase, m + 16u, n + 32u, lid);
    coopStoreT(c13, &cs_[cat], s16);
    write_out(ybase, m + 16u, n + 48u, lid);
    if (FM == 4u) {
        coopStoreT(c20, &cs_[cat], s16);
        write_out(ybase, m + 32u, n, lid);
        coopStoreT(c21, &cs_[cat], s16);
        write_out(ybase, m + 32u, n + 16u, lid);
        coopStoreT(c22, &cs_[cat], s16);
        write_out(ybase, m + 32u, n + 32u, lid);
        coopStoreT(c23, &cs_[cat], s16);
        write_out(ybase, m + 32u, n + 48u, lid);
        coopStoreT(c30, &cs_[cat], s16);
        write_out(ybase, m + 48u, n, lid);
        coopStoreT(c31, &cs_[cat], s16);
        write_out(ybase, m + 48u, n + 16u, lid);
        coopStoreT(c32, &cs_[cat], s16);
        write_out(ybase, m + 48u, n + 32u, lid);
        coopStoreT(c33, &cs_[cat], s16);
        write_out(ybase, m + 48u, n + 48u, lid);
    }
}
