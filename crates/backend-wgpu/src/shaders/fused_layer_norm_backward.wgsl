// ops::LayerNormBackward, the rows: each workgroup takes one row's sums of g and g xhat
// (g = dy weight, xhat = (x - mean) rstd) and writes dx = rstd (g - sum(g) / D - xhat
// sum(g xhat) / D). Without a weight, g = dy and the weight's binding is a placeholder.
// `summed(i, v)` gives element i's value as stored: v, or (ops::LayerNormBackwardInto) v
// rounded to the dtype and added to the gathered gradient; `keep(i, v)` writes its low copy
// where the op asks for one.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read> dy: array<S_x>;
@group(0) @binding(3) var<storage, read> mean: array<S_x>;
@group(0) @binding(4) var<storage, read> rstd: array<S_x>;
@group(0) @binding(5) var<storage, read> weight: array<S_x>;
@group(0) @binding(6) var<storage, read_write> dx: array<S_x>;

// A row of at most 256 elements is held in registers, four an invocation: element slot k of
// invocation lid is column lid + 64 k, and `short_live` says which slots the row has.
const SHORT: u32 = 256u;

fn short_cols(lid: u32) -> vec4<u32> {
  return vec4<u32>(lid, lid + 64u, lid + 128u, lid + 192u);
}

fn short_live(lid: u32) -> vec4<bool> {
  return short_cols(lid) < vec4<u32>(p.d);
}

fn g_at(base: u32, j: u32) -> f32 {
  var g = f32(load_x(dy[offset(1u) + base + j]));
  if (flag(1u)) { g = g * f32(load_x(weight[offset(4u) + j])); }
  return g;
}

fn run(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) {
  let at = row_lane(wid, nwg, lid);
  let row = at.x;
  let lane = at.y;
  if (row >= p.rows) { return; }
  let d = p.d;
  let base = row * d;
  let mu = f32(load_x(mean[offset(2u) + row]));
  let inv = f32(load_x(rstd[offset(3u) + row]));
  if (d <= SHORT && ROW_LANES == 64u) {
    // The row's x and g read once into registers.
    let j = short_cols(lid);
    let live = short_live(lid);
    var xv = vec4<f32>(0.0);
    var gv = vec4<f32>(0.0);
    if (live.x) { xv.x = f32(load_x(x[offset(0u) + base + j.x])); gv.x = g_at(base, j.x); }
    if (live.y) { xv.y = f32(load_x(x[offset(0u) + base + j.y])); gv.y = g_at(base, j.y); }
    if (live.z) { xv.z = f32(load_x(x[offset(0u) + base + j.z])); gv.z = g_at(base, j.z); }
    if (live.w) { xv.w = f32(load_x(x[offset(0u) + base + j.w])); gv.w = g_at(base, j.w); }
    let xhat = (xv - mu) * inv;
    // g is zero in the slots past the row, so they add nothing.
    let sums = sum_all(lid, vec2<f32>((gv.x + gv.y) + (gv.z + gv.w), dot(gv, xhat))) / f32(d);
    let out = inv * (gv - sums.x - xhat * sums.y);
    for (var k = 0u; k < 4u; k++) {
      if (live[k]) {
        let v = summed(base + j[k], f32(C_x(out[k])));
        dx[base + j[k]] = store_x(C_x(v));
        keep(base + j[k], v);
      }
    }
    return;
  }
  var acc = vec2<f32>(0.0);
  for (var j = lane; j < d; j += ROW_LANES) {
    let g = g_at(base, j);
    acc += vec2<f32>(g, g * (f32(load_x(x[offset(0u) + base + j])) - mu) * inv);
  }
  let sums = sum_all(lane, acc) / f32(d);
  for (var j = lane; j < d; j += ROW_LANES) {
    let xhat = (f32(load_x(x[offset(0u) + base + j])) - mu) * inv;
    let v = summed(base + j, f32(C_x(inv * (g_at(base, j) - sums.x - xhat * sums.y))));
    dx[base + j] = store_x(C_x(v));
    keep(base + j, v);
  }
}
