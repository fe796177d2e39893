// The fused attention's grid in runs of four (`common.wgsl`; unpacked only): an invocation's
// rows 4 ty .. 4 ty + 3 and 64 + ty, columns 4 tx .. 4 tx + 3 and 64 + tx, so the four
// neighbouring values of a staged row it takes are one vec4 (`mac_at`: four reads of workgroup
// memory for its 25 multiply-adds, where the strided grid's make ten). A staged row's first 64
// values are vec4s (ga_, gb_; rows padded to 17 to spread the stores over banks), the last 16
// scalars (ga4_, gb4_), each vec4 written whole by one invocation (a write of one component
// may rewrite the whole vector). A product's left operand from the grid is staged whole, 80
// deep; the rows' partial sums go through ga4_ (`across` runs between products). 31.5 KiB in
// all.

const GS: u32 = 17u;

var<workgroup> ga_: array<vec4<f32>, 1360>;
var<workgroup> ga4_: array<f32, 1280>;
var<workgroup> gb_: array<vec4<f32>, 272>;
var<workgroup> gb4_: array<f32, 256>;

fn grid_row(ty: u32, i: u32) -> u32 {
  return select(4u * ty + i, 64u + ty, i == 4u);
}

fn grid_col(tx: u32, j: u32) -> u32 {
  return select(4u * tx + j, 64u + tx, j == 4u);
}

fn red_set(i: u32, x: f32) {
  ga4_[i] = x;
}

fn red_get(i: u32) -> f32 {
  return ga4_[i];
}

// Packed results never take this grid; these only keep `store_grid` whole.
fn words_set(i: u32, x: f32) {
  ga4_[i] = x;
}

fn words_get(i: u32) -> f32 {
  return ga4_[i];
}

// out += the outer product of depth ka of a's staging and row kb of b's.
fn mac_at(ka: u32, kb: u32, tx: u32, ty: u32) {
  let a = ga_[ka * GS + ty];
  let a4 = ga4_[ka * 16u + ty];
  let b = gb_[kb * GS + tx];
  let b4 = gb4_[kb * 16u + tx];
  out[0] = fma(a.x, b.x, out[0]);
  out[1] = fma(a.x, b.y, out[1]);
  out[2] = fma(a.x, b.z, out[2]);
  out[3] = fma(a.x, b.w, out[3]);
  out[4] = fma(a.x, b4, out[4]);
  out[5] = fma(a.y, b.x, out[5]);
  out[6] = fma(a.y, b.y, out[6]);
  out[7] = fma(a.y, b.z, out[7]);
  out[8] = fma(a.y, b.w, out[8]);
  out[9] = fma(a.y, b4, out[9]);
  out[10] = fma(a.z, b.x, out[10]);
  out[11] = fma(a.z, b.y, out[11]);
  out[12] = fma(a.z, b.z, out[12]);
  out[13] = fma(a.z, b.w, out[13]);
  out[14] = fma(a.z, b4, out[14]);
  out[15] = fma(a.w, b.x, out[15]);
  out[16] = fma(a.w, b.y, out[16]);
  out[17] = fma(a.w, b.z, out[17]);
  out[18] = fma(a.w, b.w, out[18]);
  out[19] = fma(a.w, b4, out[19]);
  out[20] = fma(a4, b.x, out[20]);
  out[21] = fma(a4, b.y, out[21]);
  out[22] = fma(a4, b.z, out[22]);
  out[23] = fma(a4, b.w, out[23]);
  out[24] = fma(a4, b4, out[24]);
}

// Element (r, k0 + kk) of operand `which`, or zero past `rows` and `depth` (see `stage`).
fn staged_one(which: u32, base: u32, rs: u32, rows: u32, depth: u32, k0: u32, depth_dense: bool, r: u32, kk: u32) -> f32 {
  if (r >= rows || k0 + kk >= depth) { return 0.0; }
  return fetch(which, select(base + (k0 + kk) * rs + r, base + r * rs + k0 + kk, depth_dense));
}

// A 16-deep slice at depth k0 of operand `which` (`fetch`, the kernel's) into a's staging, or
// b's where `to_b`: element (r, k0 + kk) at base + r * rs + k0 + kk where `depth_dense` (an
// operand read along its width), else at base + (k0 + kk) * rs + r (its rows walked as the
// depth). Each invocation takes one vec4 of rows 0..63 and one row of 64..79; neighbouring
// invocations read neighbouring elements either way.
fn stage(to_b: bool, which: u32, base: u32, rs: u32, rows: u32, depth: u32, k0: u32, depth_dense: bool, lid: u32) {
  var kk = lid / 16u;
  var r4 = lid % 16u;
  if (depth_dense) {
    kk = lid % 16u;
    r4 = lid / 16u;
  }
  let x = vec4<f32>(
    staged_one(which, base, rs, rows, depth, k0, depth_dense, 4u * r4, kk),
    staged_one(which, base, rs, rows, depth, k0, depth_dense, 4u * r4 + 1u, kk),
    staged_one(which, base, rs, rows, depth, k0, depth_dense, 4u * r4 + 2u, kk),
    staged_one(which, base, rs, rows, depth, k0, depth_dense, 4u * r4 + 3u, kk),
  );
  let y = staged_one(which, base, rs, rows, depth, k0, depth_dense, 64u + r4, kk);
  if (to_b) {
    gb_[kk * GS + r4] = x;
    gb4_[kk * 16u + r4] = y;
  } else {
    ga_[kk * GS + r4] = x;
    ga4_[kk * 16u + r4] = y;
  }
}

// The grid in xr whole into a's staging as a product's left operand: a[m, k] = grid[m, k]
// (grid[k, m] where `transposed`) at depth k, row m.
fn put_a_whole(transposed: bool, tx: u32, ty: u32) {
  workgroupBarrier();
  for (var t = 0u; t < 5u; t++) {
    if (transposed) {
      let k = grid_row(ty, t);
      ga_[k * GS + tx] = vec4<f32>(xr_get(t * 5u), xr_get(t * 5u + 1u), xr_get(t * 5u + 2u), xr_get(t * 5u + 3u));
      ga4_[k * 16u + tx] = xr_get(t * 5u + 4u);
    } else {
      let k = grid_col(tx, t);
      ga_[k * GS + ty] = vec4<f32>(xr_get(t), xr_get(5u + t), xr_get(10u + t), xr_get(15u + t));
      ga4_[k * 16u + ty] = xr_get(20u + t);
    }
  }
}

fn put_a_slice(transposed: bool, g: u32, tx: u32, ty: u32) {}
