// The fused attention's grid in strides of 16 (`common.wgsl`): an invocation's rows ty + 16 i,
// columns tx + 16 j; the slices staged in ha_ and hb_, a product's left operand from the grid
// a slice at a time (`put_a`).

// The staged slices, 16 deep: ha_[kk * HT + r] = a[r, k0 + kk], hb_[kk * HT + c] = b[k0 + kk, c].
var<workgroup> ha_: array<f32, 1280>;
var<workgroup> hb_: array<f32, 1280>;
// Partial row sums and maxima: red[row * 16 + tx].
var<workgroup> red: array<f32, 1280>;

fn grid_row(ty: u32, i: u32) -> u32 {
  return ty + 16u * i;
}

fn grid_col(tx: u32, j: u32) -> u32 {
  return tx + 16u * j;
}

fn red_set(i: u32, x: f32) {
  red[i] = x;
}

fn red_get(i: u32) -> f32 {
  return red[i];
}

// A packed result's rows meet in ha_ (`store_grid`).
fn words_set(i: u32, x: f32) {
  ha_[i] = x;
}

fn words_get(i: u32) -> f32 {
  return ha_[i];
}

// out += the outer product of row kk of the staged slices (a's whole or not, ka unused).
fn mac_at(ka: u32, kk: u32, tx: u32, ty: u32) {
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

// A 16-deep slice at depth k0 of operand `which` (`fetch`, the kernel's) into ha_, or hb_
// where `to_b`: element (r, k0 + kk) at base + r * rs + k0 + kk where
// `depth_dense` (an operand read along its width), else at base + (k0 + kk) * rs + r (its
// rows walked as the depth: the right side of p v, ds k, ds^T q, p^T do). Zeros past `rows`
// and `depth`; neighbouring invocations read neighbouring elements either way.
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

fn put_a_whole(transposed: bool, tx: u32, ty: u32) {}

// ha_ from the grid held in xr: its column group g (columns 16 g .. 16 g + 15, this
// invocation's column tx + 16 g) as the slice's depth: ha_[tx * HT + row] = grid[row, 16 g +
// tx]. With `transposed`, its row group g as the depth of the grid transposed: ha_[ty * HT +
// col] = grid[16 g + ty, col].
fn put_a_slice(transposed: bool, g: u32, tx: u32, ty: u32) {
  for (var t = 0u; t < 5u; t++) {
    let v = xr_get(select(t * 5u + g, g * 5u + t, transposed));
    if (transposed) {
      ha_[ty * HT + tx + 16u * t] = v;
    } else {
      ha_[tx * HT + ty + 16u * t] = v;
    }
  }
}
