// Shared by the fused attention kernels (`fused_attention.rs`): a workgroup of 16 x 16
// invocations takes one head, whose every product fits one 80 x 80 tile (L, S, E, Ev <= 80),
// as the heads kernel of the products (matmul/heads.wgsl): each invocation holds a 5 x 5 grid
// of a tile (rows ty + 16 i, columns tx + 16 j), in registers indexed by constants only, and
// the operands are staged 16 deep in workgroup memory, zeros past the edges. Sums are f32.
//
// `AttentionParams`: p.n, p.h the batch and heads; p.l, p.s the query and key lengths; p.e,
// p.ev the widths; each strided operand as [offset, n stride, h stride, row stride], its last
// dim dense.

const HT: u32 = 80u;
const HK: u32 = 16u;

// The staged slices, 16 deep: ha_[kk * HT + r] = a[r, k0 + kk], hb_[kk * HT + c] = b[k0 + kk, c].
var<workgroup> ha_: array<f32, 1280>;
var<workgroup> hb_: array<f32, 1280>;
// Partial row sums and maxima: red[row * 16 + tx].
var<workgroup> red: array<f32, 1280>;

// out: the product being summed; xr: the probabilities (the forward's scores before them, the
// backward's score gradients after). Element i * 5 + j is row ty + 16 i, column tx + 16 j.
var<private> out: array<f32, 25>;
var<private> xr: array<f32, 25>;

// An element's index in operand `s` at (n, h, row, col).
fn elem(s: array<u32, 4>, n: u32, h: u32, row: u32, col: u32) -> u32 {
  return s[0] + n * s[1] + h * s[2] + row * s[3] + col;
}

// out += the outer product of row kk of the staged slices.
fn mac(kk: u32, tx: u32, ty: u32) {
  let a0 = ha_[kk * HT + ty];
  let a1 = ha_[kk * HT + ty + 16u];
  let a2 = ha_[kk * HT + ty + 32u];
  let a3 = ha_[kk * HT + ty + 48u];
  let a4 = ha_[kk * HT + ty + 64u];
  let b0 = hb_[kk * HT + tx];
  let b1 = hb_[kk * HT + tx + 16u];
  let b2 = hb_[kk * HT + tx + 32u];
  let b3 = hb_[kk * HT + tx + 48u];
  let b4 = hb_[kk * HT + tx + 64u];
    out[0] = fma(a0, b0, out[0]);
    out[1] = fma(a0, b1, out[1]);
    out[2] = fma(a0, b2, out[2]);
    out[3] = fma(a0, b3, out[3]);
    out[4] = fma(a0, b4, out[4]);
    out[5] = fma(a1, b0, out[5]);
    out[6] = fma(a1, b1, out[6]);
    out[7] = fma(a1, b2, out[7]);
    out[8] = fma(a1, b3, out[8]);
    out[9] = fma(a1, b4, out[9]);
    out[10] = fma(a2, b0, out[10]);
    out[11] = fma(a2, b1, out[11]);
    out[12] = fma(a2, b2, out[12]);
    out[13] = fma(a2, b3, out[13]);
    out[14] = fma(a2, b4, out[14]);
    out[15] = fma(a3, b0, out[15]);
    out[16] = fma(a3, b1, out[16]);
    out[17] = fma(a3, b2, out[17]);
    out[18] = fma(a3, b3, out[18]);
    out[19] = fma(a3, b4, out[19]);
    out[20] = fma(a4, b0, out[20]);
    out[21] = fma(a4, b1, out[21]);
    out[22] = fma(a4, b2, out[22]);
    out[23] = fma(a4, b3, out[23]);
    out[24] = fma(a4, b4, out[24]);
}

// The staged slice's first `count` rows of depth (a multiple of four past it reads zeros).
fn mac16(count: u32, tx: u32, ty: u32) {
  for (var kk = 0u; kk < count; kk += 4u) {
    mac(kk, tx, ty);
    mac(kk + 1u, tx, ty);
    mac(kk + 2u, tx, ty);
    mac(kk + 3u, tx, ty);
  }
}

fn clear_out() {
  out = array<f32, 25>();
}

// Element-wise access by a computed index (a switch, so the arrays stay in registers): for
// the few passes outside the products.
fn out_get(i: u32) -> f32 {
  switch i {
    case 0u: { return out[0]; }
    case 1u: { return out[1]; }
    case 2u: { return out[2]; }
    case 3u: { return out[3]; }
    case 4u: { return out[4]; }
    case 5u: { return out[5]; }
    case 6u: { return out[6]; }
    case 7u: { return out[7]; }
    case 8u: { return out[8]; }
    case 9u: { return out[9]; }
    case 10u: { return out[10]; }
    case 11u: { return out[11]; }
    case 12u: { return out[12]; }
    case 13u: { return out[13]; }
    case 14u: { return out[14]; }
    case 15u: { return out[15]; }
    case 16u: { return out[16]; }
    case 17u: { return out[17]; }
    case 18u: { return out[18]; }
    case 19u: { return out[19]; }
    case 20u: { return out[20]; }
    case 21u: { return out[21]; }
    case 22u: { return out[22]; }
    case 23u: { return out[23]; }
    case 24u: { return out[24]; }
    default: { return 0.0; }
  }
}

fn xr_get(i: u32) -> f32 {
  switch i {
    case 0u: { return xr[0]; }
    case 1u: { return xr[1]; }
    case 2u: { return xr[2]; }
    case 3u: { return xr[3]; }
    case 4u: { return xr[4]; }
    case 5u: { return xr[5]; }
    case 6u: { return xr[6]; }
    case 7u: { return xr[7]; }
    case 8u: { return xr[8]; }
    case 9u: { return xr[9]; }
    case 10u: { return xr[10]; }
    case 11u: { return xr[11]; }
    case 12u: { return xr[12]; }
    case 13u: { return xr[13]; }
    case 14u: { return xr[14]; }
    case 15u: { return xr[15]; }
    case 16u: { return xr[16]; }
    case 17u: { return xr[17]; }
    case 18u: { return xr[18]; }
    case 19u: { return xr[19]; }
    case 20u: { return xr[20]; }
    case 21u: { return xr[21]; }
    case 22u: { return xr[22]; }
    case 23u: { return xr[23]; }
    case 24u: { return xr[24]; }
    default: { return 0.0; }
  }
}

fn xr_set(i: u32, v: f32) {
  switch i {
    case 0u: { xr[0] = v; }
    case 1u: { xr[1] = v; }
    case 2u: { xr[2] = v; }
    case 3u: { xr[3] = v; }
    case 4u: { xr[4] = v; }
    case 5u: { xr[5] = v; }
    case 6u: { xr[6] = v; }
    case 7u: { xr[7] = v; }
    case 8u: { xr[8] = v; }
    case 9u: { xr[9] = v; }
    case 10u: { xr[10] = v; }
    case 11u: { xr[11] = v; }
    case 12u: { xr[12] = v; }
    case 13u: { xr[13] = v; }
    case 14u: { xr[14] = v; }
    case 15u: { xr[15] = v; }
    case 16u: { xr[16] = v; }
    case 17u: { xr[17] = v; }
    case 18u: { xr[18] = v; }
    case 19u: { xr[19] = v; }
    case 20u: { xr[20] = v; }
    case 21u: { xr[21] = v; }
    case 22u: { xr[22] = v; }
    case 23u: { xr[23] = v; }
    case 24u: { xr[24] = v; }
    default: {}
  }
}

// ha_ from the grid held in xr: its column group g (columns 16 g .. 16 g + 15, this
// invocation's column tx + 16 g) as the slice's depth: ha_[tx * HT + row] = grid[row, 16 g +
// tx]. With `transposed`, its row group g as the depth of the grid transposed: ha_[ty * HT +
// col] = grid[16 g + ty, col].
fn put_a(transposed: bool, g: u32, tx: u32, ty: u32) {
  for (var t = 0u; t < 5u; t++) {
    let v = xr_get(select(t * 5u + g, g * 5u + t, transposed));
    if (transposed) {
      ha_[ty * HT + tx + 16u * t] = v;
    } else {
      ha_[tx * HT + ty + 16u * t] = v;
    }
  }
}

// The workgroup's head as (n, h, 1), or z = 0 past the grid's end (uniform: it depends on the
// workgroup alone).
fn head_of(wid: vec3<u32>, nwg: vec3<u32>) -> vec3<u32> {
  let g = wid.y * nwg.x + wid.x;
  if (g >= p.n * p.h) { return vec3<u32>(0u, 0u, 0u); }
  return vec3<u32>(g / p.h, g % p.h, 1u);
}

// The five rows of this invocation's grid each reduced over the workgroup's 16 invocations of
// that row: their partials (`parts`, row i at i) through red, summed (or, with `is_max`, the
// largest). Every invocation calls it at the same point.
fn across(parts: array<f32, 5>, is_max: bool, tx: u32, ty: u32) -> array<f32, 5> {
  if (ACROSS_SHUFFLE) {
    // A row's 16 invocations are 16 neighbours of one subgroup (ACROSS_SHUFFLE where the
    // subgroups are 16 wide or more): a butterfly, after which all 16 hold the same bits.
    var r = parts;
    for (var m = 8u; m > 0u; m = m >> 1u) {
      for (var i = 0u; i < 5u; i++) {
        let o = subgroupShuffleXor(r[i], m);
        r[i] = select(r[i] + o, max(r[i], o), is_max);
      }
    }
    return r;
  }
  workgroupBarrier();
  red[ty * 16u + tx] = parts[0];
  red[(ty + 16u) * 16u + tx] = parts[1];
  red[(ty + 32u) * 16u + tx] = parts[2];
  red[(ty + 48u) * 16u + tx] = parts[3];
  red[(ty + 64u) * 16u + tx] = parts[4];
  workgroupBarrier();
  var r = parts;
  for (var i = 0u; i < 5u; i++) {
    let row = (ty + 16u * i) * 16u;
    var acc = red[row];
    for (var t = 1u; t < 16u; t++) {
      let v = red[row + t];
      acc = select(acc + v, max(acc, v), is_max);
    }
    r[i] = acc;
  }
  return r;
}

// A 16-deep slice at depth k0 of operand `which` (`fetch`, the kernel's) into ha_, or hb_
// where `to_b`: element (r, k0 + kk) at base + r * rs + k0 + kk where `depth_dense` (an
// operand read along its width), else at base + (k0 + kk) * rs + r (its rows walked as the
// depth: the right side of p v, ds k, ds^T q, p^T do). Zeros past `rows` and `depth`;
// neighbouring invocations read neighbouring elements either way.
fn stage(to_b: bool, which: u32, base: u32, rs: u32, rows: u32, depth: u32, k0: u32, depth_dense: bool, lid: u32) {
  for (var piece = 0u; piece < 5u; piece++) {
    let e = lid + 256u * piece;
    var r = e / HK;
    var kk = e % HK;
    if (!depth_dense) {
      kk = e / HT;
      r = e % HT;
    }
    var x = 0.0;
    if (r < rows && k0 + kk < depth) {
      x = fetch(which, select(base + (k0 + kk) * rs + r, base + r * rs + k0 + kk, depth_dense));
    }
    if (to_b) {
      hb_[kk * HT + r] = x;
    } else {
      ha_[kk * HT + r] = x;
    }
  }
}

// out = a b over `depth`, a from the grid in xr (`put_a`, transposed or not) and b operand
// `which` staged with its rows walked as the depth (`stage`, rows dense).
fn product_from_grid(transposed: bool, which: u32, base: u32, rs: u32, cols: u32, depth: u32, tx: u32, ty: u32, lid: u32) {
  clear_out();
  for (var g = 0u; g * HK < depth; g++) {
    workgroupBarrier();
    put_a(transposed, g, tx, ty);
    stage(true, which, base, rs, cols, depth, g * HK, false, lid);
    workgroupBarrier();
    mac16(min(HK, depth - g * HK), tx, ty);
  }
}

// out = a b^T over `depth`, both staged along their width.
fn product_staged(wa: u32, abase: u32, ars: u32, arows: u32, wb: u32, bbase: u32, brs: u32, brows: u32, depth: u32, tx: u32, ty: u32, lid: u32) {
  clear_out();
  for (var k0 = 0u; k0 < depth; k0 += HK) {
    workgroupBarrier();
    stage(false, wa, abase, ars, arows, depth, k0, true, lid);
    stage(true, wb, bbase, brs, brows, depth, k0, true, lid);
    workgroupBarrier();
    mac16(min(HK, depth - k0), tx, ty);
  }
}

// The grid in `out` (rows < `rows`, columns < `width`) into result `which` (`put`, the
// kernel's), row r of this head at (n * rows + r) * row_len + h * width: the layout the heads
// merge into, a row of H heads, or where p.joined of the three results side by side
// (self-attention's, so `width` is E for each). Packed, neighbouring columns meet in one word
// through ha_, 16 rows at a time (`width` even, so every row starts a word).
fn store_grid(which: u32, n: u32, h: u32, rows: u32, width: u32, tx: u32, ty: u32, lid: u32) {
  var row_len = p.h * width;
  var base = h * width;
  if (p.joined != 0u) {
    row_len = 3u * row_len;
    base += which * p.h * width;
  }
  if (!PACKED) {
    for (var t = 0u; t < 25u; t++) {
      let row = ty + 16u * (t / 5u);
      let c = tx + 16u * (t % 5u);
      if (row < rows && c < width) { put(which, (n * rows + row) * row_len + base + c, one_(out_get(t))); }
    }
    return;
  }
  for (var i = 0u; i < 5u; i++) {
    workgroupBarrier();
    for (var j = 0u; j < 5u; j++) { ha_[ty * HT + tx + 16u * j] = out_get(i * 5u + j); }
    workgroupBarrier();
    for (var w = lid; w < 640u; w += 256u) {
      let r = w / 40u;
      let c = 2u * (w % 40u);
      let row = 16u * i + r;
      if (row < rows && c < width) { put(which, ((n * rows + row) * row_len + base + c) >> 1u, two_(ha_[r * HT + c], ha_[r * HT + c + 1u])); }
    }
  }
}
