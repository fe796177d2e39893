// Batched matrix product y[b] = a[b] x b[b] of f16 operands on cooperative matrices (tensor
// cores): f16 x f16 products summed in f32, rounded to f16 on store, or kept in f32 as partial
// sums over a split of K. Bindings, params and grid are matmul.wgsl's; tiles are 128 x 128.
//
// A workgroup of 128 invocations is four subgroups of 32 (the Rust side picks this kernel only
// where the adapter's subgroups are exactly 32 wide, so subgroup s is invocations 32s..32s+31);
// subgroup s computes the 64 x 64 quarter (s / 2, s % 2) of the tile as 4 x 4 cooperative
// 16 x 16 sums. Each step stages a BK-deep slice of a and b in workgroup memory as f16, zeros
// past the edges of the operands (so any M, N and K work), then every subgroup multiplies its
// part of the slice. The sums leave through a 16 x 16 scratch per subgroup, from which its
// invocations write the elements that lie inside y.
//
// Cooperative ops must be reached by the whole subgroup at once: nothing before one branches on
// the invocation, every loop bound is the workgroup's. Every index and stride handed to a
// cooperative load or store is a `let` of its own.
//
// Chosen per kernel: the bindings and fetch_a / fetch_a4 / fetch_b / fetch_b4 / store_y (parts
// from matmul/ before this file); A_LOAD and B_LOAD, how the slices are read: LOAD_K, vec4s
// along K; LOAD_OUTER, vec4s along M (of a) / N (of b); LOAD_STRIDED, scalars through any
// strides, walking the dim params[12] / params[13] names.

const LOAD_K: u32 = 0u;
const LOAD_OUTER: u32 = 1u;
const LOAD_STRIDED: u32 = 2u;

const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 32u;
const WG: u32 = 128u;
// Row strides of the staged slices, in vec4s of f16: a as row-major BM x BK, b as row-major
// BK x BN, each row padded by 8 f16 so that the rows a cooperative load reads at once fall on
// different banks (rows stay 16-byte aligned).
const AS: u32 = (BK + 8u) / 4u;
const BS: u32 = (BN + 8u) / 4u;

var<workgroup> as_: array<vec4<f16>, BM * AS>;
var<workgroup> bs_: array<vec4<f16>, BK * BS>;
// One 16 x 16 f32 scratch per subgroup for the sums on their way out.
var<workgroup> cs_: array<f32, 1024>;

// The end of the K range of the tile being computed; loads past it read zeros.
var<private> kend: u32;

fn dims_() -> vec4<u32> {
    return vec4<u32>(params[0], params[1], params[2], params[3]);
}

fn out_at(ybase: u32, m: u32, n: u32) -> u32 {
    return ybase + m * params[3] + n;
}

// Element (mm, kk) of a's slice, (kk, nn) of b's.
fn put_a(mm: u32, kk: u32, x: f16) {
    let at = mm * AS * 4u + kk;
    as_[at / 4u][at % 4u] = x;
}

fn put_b(kk: u32, nn: u32, x: f16) {
    let at = kk * BS * 4u + nn;
    bs_[at / 4u][at % 4u] = x;
}

// a[m0.., k0..] into as_, neighbouring invocations reading neighbouring elements.
fn stage_a(lid: u32, base: u32, m0: u32, k0: u32) {
    if (A_LOAD == LOAD_K) {
        for (var i = 0u; i < BM * BK / 4u / WG; i++) {
            let v = lid + WG * i;
            let mm = v / (BK / 4u);
            let kk = (v % (BK / 4u)) * 4u;
            var x = vec4<C_x>();
            if (m0 + mm < params[1] && k0 + kk < kend) { x = fetch_a4(base + (m0 + mm) * params[5] + k0 + kk); }
            as_[mm * AS + kk / 4u] = vec4<f16>(x);
        }
    } else if (A_LOAD == LOAD_OUTER) {
        for (var i = 0u; i < BM * BK / 4u / WG; i++) {
            let v = lid + WG * i;
            let mm = (v % (BM / 4u)) * 4u;
            let kk = v / (BM / 4u);
            var x = vec4<C_x>();
            if (m0 + mm < params[1] && k0 + kk < kend) { x = fetch_a4(base + (k0 + kk) * params[6] + m0 + mm); }
            put_a(mm, kk, f16(x.x));
            put_a(mm + 1u, kk, f16(x.y));
            put_a(mm + 2u, kk, f16(x.z));
            put_a(mm + 3u, kk, f16(x.w));
        }
    } else {
        for (var i = 0u; i < BM * BK / WG; i++) {
            let e = lid + WG * i;
            var at = vec2<u32>(e / BK, e % BK);
            if (params[12] != 0u) { at = vec2<u32>(e % BM, e / BM); }
            var x = C_x(0);
            if (m0 + at.x < params[1] && k0 + at.y < kend) { x = fetch_a(base + (m0 + at.x) * params[5] + (k0 + at.y) * params[6]); }
            put_a(at.x, at.y, f16(x));
        }
    }
}

// b[k0.., n0..] into bs_.
fn stage_b(lid: u32, base: u32, n0: u32, k0: u32) {
    if (B_LOAD == LOAD_K) {
        for (var i = 0u; i < BN * BK / 4u / WG; i++) {
            let v = lid + WG * i;
            let nn = v / (BK / 4u);
            let kk = (v % (BK / 4u)) * 4u;
            var x = vec4<C_x>();
            if (n0 + nn < params[3] && k0 + kk < kend) { x = fetch_b4(base + (n0 + nn) * params[10] + k0 + kk); }
            put_b(kk, nn, f16(x.x));
            put_b(kk + 1u, nn, f16(x.y));
            put_b(kk + 2u, nn, f16(x.z));
            put_b(kk + 3u, nn, f16(x.w));
        }
    } else if (B_LOAD == LOAD_OUTER) {
        for (var i = 0u; i < BN * BK / 4u / WG; i++) {
            let v = lid + WG * i;
            let nn = (v % (BN / 4u)) * 4u;
            let kk = v / (BN / 4u);
            var x = vec4<C_x>();
            if (n0 + nn < params[3] && k0 + kk < kend) { x = fetch_b4(base + (k0 + kk) * params[9] + n0 + nn); }
            bs_[kk * BS + nn / 4u] = vec4<f16>(x);
        }
    } else {
        for (var i = 0u; i < BN * BK / WG; i++) {
            let e = lid + WG * i;
            var at = vec2<u32>(e / BK, e % BK);
            if (params[13] != 0u) { at = vec2<u32>(e % BN, e / BN); }
            var x = C_x(0);
            if (n0 + at.x < params[3] && k0 + at.y < kend) { x = fetch_b(base + (k0 + at.y) * params[9] + (n0 + at.x) * params[10]); }
            put_b(at.y, at.x, f16(x));
        }
    }
}

// The 16 x 16 sum the subgroup has just stored in its scratch into rows m.., columns n.. of y
// (those inside it). Every invocation of the workgroup calls this at the same point (it holds
// barriers: the first makes the scratch visible, the second frees it for the next sum).
fn write_out(ybase: u32, m: u32, n: u32, lid: u32) {
    workgroupBarrier();
    let at = (lid / 32u) * 256u;
    let d = dims_();
    for (var i = lid % 32u; i < 256u; i += 32u) {
        let mm = m + i / 16u;
        let nn = n + i % 16u;
        if (mm < d.y && nn < d.w) { store_y(out_at(ybase, mm, nn), cs_[at + i]); }
    }
    workgroupBarrier();
}

// One BM x BN tile of y at (m0, n0): the product over k in [k0, k1) of the operands whose
// elements start at abase and bbase, stored through out_at(ybase, ..).
fn tile(abase: u32, bbase: u32, m0: u32, n0: u32, k0: u32, k1: u32, ybase: u32, lid: u32) {
    kend = k1;
    let sg = lid / 32u;
    // The subgroup's quarter: rows wm.., columns wn.. of the tile.
    let wm = (sg / 2u) * 64u;
    let wn = (sg % 2u) * 64u;
    let sa = AS;
    let sb = BS;
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
    for (var k = k0; k < k1; k += BK) {
        // The previous slice's loads are done before it is overwritten.
        workgroupBarrier();
        stage_a(lid, abase, m0, k);
        stage_b(lid, bbase, n0, k);
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk += 16u) {
            let ia0 = wm * AS + kk / 4u;
            let ia1 = (wm + 16u) * AS + kk / 4u;
            let ia2 = (wm + 32u) * AS + kk / 4u;
            let ia3 = (wm + 48u) * AS + kk / 4u;
            let ib0 = kk * BS + wn / 4u;
            let ib1 = kk * BS + (wn + 16u) / 4u;
            let ib2 = kk * BS + (wn + 32u) / 4u;
            let ib3 = kk * BS + (wn + 48u) / 4u;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&as_[ia0], sa);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&as_[ia1], sa);
            let a2 = coopLoadT<coop_mat16x16<f16, A>>(&as_[ia2], sa);
            let a3 = coopLoadT<coop_mat16x16<f16, A>>(&as_[ia3], sa);
            let b0 = coopLoadT<coop_mat16x16<f16, B>>(&bs_[ib0], sb);
            let b1 = coopLoadT<coop_mat16x16<f16, B>>(&bs_[ib1], sb);
            let b2 = coopLoadT<coop_mat16x16<f16, B>>(&bs_[ib2], sb);
            let b3 = coopLoadT<coop_mat16x16<f16, B>>(&bs_[ib3], sb);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c02 = coopMultiplyAdd(a0, b2, c02);
            c03 = coopMultiplyAdd(a0, b3, c03);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            c12 = coopMultiplyAdd(a1, b2, c12);
            c13 = coopMultiplyAdd(a1, b3, c13);
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
    let m = m0 + wm;
    let n = n0 + wn;
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

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // As matmul.wgsl: tiles beyond the grid's 65,535 per dimension are taken in turn.
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
                tile(params[7] + b * params[4], params[11] + b * params[8], my * BM, nx * BN, k0, k1, ybase, lid);
            }
        }
    }
}
