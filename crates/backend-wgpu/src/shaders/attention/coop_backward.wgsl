// ops::AttentionBackward on cooperative matrices (tensor cores, f16; see `fused_attention.rs`):
// a head a workgroup of five subgroups of exactly 32 invocations, subgroup s computing rows
// 16 s .. 16 s + 15 of each product, its five 16 x 16 tiles at once (independent sums, so the
// tensor cores' latencies overlap). A head's operands are staged whole in workgroup memory as
// f16, zeros out to 80 x 80, so every product is a loop of 16 x 16 x 16 sums over whole tiles.
// Each tile then goes through the subgroup's 16 x 16 f32 scratch to `consume`, where an
// invocation takes 8 columns of a row (two neighbours a row): the score gradients, or a
// result's store.
//
// dv = p^T do; dp = do v^T, handed on twice, for the row sums of p dp and for ds = p (dp -
// sum(p dp)) * scale, written over p; then dq = ds k and dk = ds^T q. Stored [N, L, H, E],
// [N, S, H, E] and [N, S, H, Ev], or where p.joined (ops::AttentionBackwardJoined) into one
// [N, L, 3, H, E] bound as dq. ds is rounded to f16 for its products. q, k, v and do are read
// four values at a time (their offsets, strides and widths multiples of 4), p one at a time;
// the results are written four at a time.
//
// Cooperative ops are reached by the whole workgroup at once: no branch before one tests more
// than params and constants, and every index and stride handed to one is a `let` of its own.
//
// `AttentionParams` as common.wgsl's.

@group(0) @binding(1) var<storage, read> q: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f16>>;
@group(0) @binding(4) var<storage, read> g: array<vec4<f16>>;
@group(0) @binding(5) var<storage, read> pr: array<f16>;
@group(0) @binding(6) var<storage, read_write> dq: array<vec4<f16>>;
@group(0) @binding(7) var<storage, read_write> dk: array<vec4<f16>>;
@group(0) @binding(8) var<storage, read_write> dv: array<vec4<f16>>;

// This invocation's row's sum of p dp, over its 8 columns a tile.
var<private> along_: f32;

// The longest side a head may have, and the row stride of a staged operand in vec4s of f16: 80
// and 8 of padding, so rows stay 16-byte aligned and the 8 rows a tensor-core load reads
// fall on different banks.
const T: u32 = 80u;
const RS: u32 = 22u;
const SLOT: u32 = 1760u;
const WGS: u32 = 160u;

// Three staged operands (slots 0, 1, 2: each T rows of RS vec4s), and the subgroups' scratch.
var<workgroup> st_: array<vec4<f16>, 5280>;
var<workgroup> cs_: array<f32, 1280>;

// This invocation's head (n, h), subgroup, lane, row of a tile and first of 8 columns.
var<private> n_: u32;
var<private> h_: u32;
var<private> sg_: u32;
var<private> li_: u32;
var<private> rr_: u32;
var<private> c8_: u32;

fn elem(s: array<u32, 4>, n: u32, h: u32, row: u32, col: u32) -> u32 {
  return s[0] + n * s[1] + h * s[2] + row * s[3] + col;
}

// Whole 16 x 16 tiles that cover x.
fn tiles(x: u32) -> u32 {
  return (x + 15u) / 16u;
}

// Sets the private state above for head g.
fn begin(g: u32, lid: u32) {
  n_ = g / p.h;
  h_ = g % p.h;
  sg_ = lid / 32u;
  li_ = lid % 32u;
  rr_ = li_ / 2u;
  c8_ = (li_ % 2u) * 8u;
}

// `rows` x `width` of operand `which` (`fetch4`: vec4s of f16; element (r, c) at
// base + r * rs + c, base, rs and width multiples of 4) into `slot`, zeros out to T x T. A
// fixed count of pieces an invocation, so the driver can issue all their loads before the
// first store.
fn stage4(slot: u32, which: u32, base: u32, rs: u32, rows: u32, width: u32, lid: u32) {
  for (var i = 0u; i < T * (T / 4u) / WGS; i++) {
    let e = lid + WGS * i;
    let r = e / (T / 4u);
    let c4 = e % (T / 4u);
    var x = vec4<f16>();
    if (r < rows && c4 * 4u < width) { x = fetch4(which, (base + r * rs) / 4u + c4); }
    st_[slot * SLOT + r * RS + c4] = x;
  }
}

// A's 16 x 16 block at rows r0.., depth k0.. of a slot holding A row by row (`a_row`), or
// holding A's transpose (`a_col`: A's rows are the slot's columns).
fn a_row(slot: u32, r0: u32, k0: u32) -> coop_mat16x16<f16, A> {
  let at = slot * SLOT + r0 * RS + k0 / 4u;
  let s = RS;
  return coopLoadT<coop_mat16x16<f16, A>>(&st_[at], s);
}

fn a_col(slot: u32, r0: u32, k0: u32) -> coop_mat16x16<f16, A> {
  let at = slot * SLOT + k0 * RS + r0 / 4u;
  let s = RS;
  return coopLoad<coop_mat16x16<f16, A>>(&st_[at], s);
}

// B's block at depth k0.., columns n0.. of a slot holding B row by row, or its transpose.
fn b_row(slot: u32, k0: u32, n0: u32) -> coop_mat16x16<f16, B> {
  let at = slot * SLOT + k0 * RS + n0 / 4u;
  let s = RS;
  return coopLoadT<coop_mat16x16<f16, B>>(&st_[at], s);
}

fn b_col(slot: u32, k0: u32, n0: u32) -> coop_mat16x16<f16, B> {
  let at = slot * SLOT + n0 * RS + k0 / 4u;
  let s = RS;
  return coopLoad<coop_mat16x16<f16, B>>(&st_[at], s);
}

// c into this subgroup's scratch, row by row, then `consume(mode, j, ..)` of it. Every
// invocation calls it at the same point: the first barrier lets the scratch's last readers
// finish, the second makes c visible.
fn hand(c: coop_mat16x16<f32, C>, mode: u32, j: u32, which: u32, rows: u32, width: u32) {
  workgroupBarrier();
  let at = sg_ * 256u;
  let s = 16u;
  coopStoreT(c, &cs_[at], s);
  workgroupBarrier();
  consume(mode, j, which, rows, width);
}

// Rows 16 sg_.. of a b, all five column tiles, over `kt` tiles of depth, a in slot sa and b in
// slot sb as the name says (rr both row by row, cr a transposed), each tile handed on (`hand`)
// in turn.
fn rows_rr(sa: u32, sb: u32, kt: u32, mode: u32, which: u32, rows: u32, width: u32) {
  let r0 = sg_ * 16u;
  var c0 = coop_mat16x16<f32, C>();
  var c1 = coop_mat16x16<f32, C>();
  var c2 = coop_mat16x16<f32, C>();
  var c3 = coop_mat16x16<f32, C>();
  var c4 = coop_mat16x16<f32, C>();
  for (var kb = 0u; kb < kt; kb++) {
    let k0 = kb * 16u;
    let a = a_row(sa, r0, k0);
    c0 = coopMultiplyAdd(a, b_row(sb, k0, 0u), c0);
    c1 = coopMultiplyAdd(a, b_row(sb, k0, 16u), c1);
    c2 = coopMultiplyAdd(a, b_row(sb, k0, 32u), c2);
    c3 = coopMultiplyAdd(a, b_row(sb, k0, 48u), c3);
    c4 = coopMultiplyAdd(a, b_row(sb, k0, 64u), c4);
  }
  hand(c0, mode, 0u, which, rows, width);
  hand(c1, mode, 1u, which, rows, width);
  hand(c2, mode, 2u, which, rows, width);
  hand(c3, mode, 3u, which, rows, width);
  hand(c4, mode, 4u, which, rows, width);
}

// Rows 16 sg_.. of a b^T (b in slot sb row by row), its five tiles handed on twice: in `first`
// mode, then, after `between`, in `then` mode (row statistics, then their use).
fn rows_rc_twice(sa: u32, sb: u32, kt: u32, first: u32, then: u32) {
  let r0 = sg_ * 16u;
  var c0 = coop_mat16x16<f32, C>();
  var c1 = coop_mat16x16<f32, C>();
  var c2 = coop_mat16x16<f32, C>();
  var c3 = coop_mat16x16<f32, C>();
  var c4 = coop_mat16x16<f32, C>();
  for (var kb = 0u; kb < kt; kb++) {
    let k0 = kb * 16u;
    let a = a_row(sa, r0, k0);
    c0 = coopMultiplyAdd(a, b_col(sb, k0, 0u), c0);
    c1 = coopMultiplyAdd(a, b_col(sb, k0, 16u), c1);
    c2 = coopMultiplyAdd(a, b_col(sb, k0, 32u), c2);
    c3 = coopMultiplyAdd(a, b_col(sb, k0, 48u), c3);
    c4 = coopMultiplyAdd(a, b_col(sb, k0, 64u), c4);
  }
  hand(c0, first, 0u, 0u, 0u, 0u);
  hand(c1, first, 1u, 0u, 0u, 0u);
  hand(c2, first, 2u, 0u, 0u, 0u);
  hand(c3, first, 3u, 0u, 0u, 0u);
  hand(c4, first, 4u, 0u, 0u, 0u);
  between();
  hand(c0, then, 0u, 0u, 0u, 0u);
  hand(c1, then, 1u, 0u, 0u, 0u);
  hand(c2, then, 2u, 0u, 0u, 0u);
  hand(c3, then, 3u, 0u, 0u, 0u);
  hand(c4, then, 4u, 0u, 0u, 0u);
}

fn rows_cr(sa: u32, sb: u32, kt: u32, mode: u32, which: u32, rows: u32, width: u32) {
  let r0 = sg_ * 16u;
  var c0 = coop_mat16x16<f32, C>();
  var c1 = coop_mat16x16<f32, C>();
  var c2 = coop_mat16x16<f32, C>();
  var c3 = coop_mat16x16<f32, C>();
  var c4 = coop_mat16x16<f32, C>();
  for (var kb = 0u; kb < kt; kb++) {
    let k0 = kb * 16u;
    let a = a_col(sa, r0, k0);
    c0 = coopMultiplyAdd(a, b_row(sb, k0, 0u), c0);
    c1 = coopMultiplyAdd(a, b_row(sb, k0, 16u), c1);
    c2 = coopMultiplyAdd(a, b_row(sb, k0, 32u), c2);
    c3 = coopMultiplyAdd(a, b_row(sb, k0, 48u), c3);
    c4 = coopMultiplyAdd(a, b_row(sb, k0, 64u), c4);
  }
  hand(c0, mode, 0u, which, rows, width);
  hand(c1, mode, 1u, which, rows, width);
  hand(c2, mode, 2u, which, rows, width);
  hand(c3, mode, 3u, which, rows, width);
  hand(c4, mode, 4u, which, rows, width);
}

// Columns c8_ .. c8_ + 7 of row rr_ of this subgroup's scratch.
fn scratch8() -> array<vec4<f32>, 2> {
  let at = sg_ * 256u + rr_ * 16u + c8_;
  return array<vec4<f32>, 2>(vec4<f32>(cs_[at], cs_[at + 1u], cs_[at + 2u], cs_[at + 3u]), vec4<f32>(cs_[at + 4u], cs_[at + 5u], cs_[at + 6u], cs_[at + 7u]));
}

// The scratch's tile as column tile j of result `which` (`put4`) at rows 16 sg_.., those inside
// `rows` x `width` (a multiple of 4), an invocation its 8 columns of a row: row r of head (n, h)
// at (n * rows + r) * row_len + h * width, the layout the heads merge into, or where p.joined
// of the three results side by side.
fn store_scratch(j: u32, which: u32, rows: u32, width: u32) {
  var row_len = p.h * width;
  var base = h_ * width;
  if (p.joined != 0u) {
    row_len = 3u * row_len;
    base += which * p.h * width;
  }
  let row = sg_ * 16u + rr_;
  let col = j * 16u + c8_;
  if (row < rows) {
    let x = scratch8();
    let at = ((n_ * rows + row) * row_len + base + col) / 4u;
    if (col < width) { put4(which, at, vec4<f16>(x[0])); }
    if (col + 4u < width) { put4(which, at + 1u, vec4<f16>(x[1])); }
  }
}

fn fetch4(which: u32, i: u32) -> vec4<f16> {
  switch which {
    case 0u: { return q[i]; }
    case 1u: { return k[i]; }
    case 2u: { return v[i]; }
    default: { return g[i]; }
  }
}

// p's `rows` x `width` (rows S long, not a multiple of 4 in general) into slot 0, as `stage4`.
fn stage_p(base: u32, rs: u32, rows: u32, width: u32, lid: u32) {
  for (var i = 0u; i < T * (T / 4u) / WGS; i++) {
    let e = lid + WGS * i;
    let r = e / (T / 4u);
    let c = (e % (T / 4u)) * 4u;
    var x = vec4<f16>();
    if (r < rows) {
      let at = base + r * rs + c;
      if (c < width) { x.x = pr[at]; }
      if (c + 1u < width) { x.y = pr[at + 1u]; }
      if (c + 2u < width) { x.z = pr[at + 2u]; }
      if (c + 3u < width) { x.w = pr[at + 3u]; }
    }
    st_[r * RS + c / 4u] = x;
  }
}

// Between dp's tiles into the row's sum of p dp and into ds: the row's other half.
fn between() {
  along_ += subgroupShuffleXor(along_, 1u);
}

// Joined (p.joined), all three results go to dq's binding.
fn put4(which: u32, i: u32, x: vec4<f16>) {
  if (p.joined != 0u) {
    dq[i] = x;
    return;
  }
  switch which {
    case 0u: { dq[i] = x; }
    case 1u: { dk[i] = x; }
    default: { dv[i] = x; }
  }
}

// Column tile j of dp (mode 1: into the row's sum of p dp; mode 2: ds over p in slot 0), or of
// a result (mode 0). p is zero past the queries and keys, so ds is too.
fn consume(mode: u32, j: u32, which: u32, rows: u32, width: u32) {
  if (mode == 0u) {
    store_scratch(j, which, rows, width);
    return;
  }
  let dp = scratch8();
  let at = (sg_ * 16u + rr_) * RS + (j * 16u + c8_) / 4u;
  let p0 = vec4<f32>(st_[at]);
  let p1 = vec4<f32>(st_[at + 1u]);
  if (mode == 1u) {
    along_ += dot(p0, dp[0]) + dot(p1, dp[1]);
    return;
  }
  st_[at] = vec4<f16>(p0 * (dp[0] - along_) * p.scale);
  st_[at + 1u] = vec4<f16>(p1 * (dp[1] - along_) * p.scale);
}

@compute @workgroup_size(160)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let hg = wid.y * nwg.x + wid.x;
  if (hg >= p.n * p.h) { return; }
  begin(hg, lid);
  // p in slot 0 (ds over it), do in slot 1 (then k), v in slot 2 (then q).
  stage_p(elem(p.pr, n_, h_, 0u, 0u), p.pr[3], p.l, p.s, lid);
  stage4(1u, 3u, elem(p.g, n_, h_, 0u, 0u), p.g[3], p.l, p.ev, lid);
  stage4(2u, 2u, elem(p.v, n_, h_, 0u, 0u), p.v[3], p.s, p.ev, lid);
  workgroupBarrier();
  // dv's rows (keys): p^T do over the queries.
  rows_cr(0u, 1u, tiles(p.l), 0u, 2u, p.s, p.ev);
  // Past the first barrier below every subgroup is done with dv, so each may then write ds
  // over its own rows of p.
  along_ = 0.0;
  rows_rc_twice(1u, 2u, tiles(p.ev), 1u, 2u);
  // Every subgroup is done with do and v, and every row of ds is written.
  workgroupBarrier();
  stage4(1u, 1u, elem(p.k, n_, h_, 0u, 0u), p.k[3], p.s, p.e, lid);
  stage4(2u, 0u, elem(p.q, n_, h_, 0u, 0u), p.q[3], p.l, p.e, lid);
  workgroupBarrier();
  rows_rr(0u, 1u, tiles(p.s), 0u, 0u, p.l, p.e);
  rows_cr(0u, 2u, tiles(p.l), 0u, 1u, p.s, p.e);
}
