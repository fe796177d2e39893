// ops::LayerNorm: each workgroup (or subgroup) normalizes one row, its mean first and then the
// mean of squared deviations (two passes over the row, as the CPU's kernel: no variance taken
// as a difference of large sums), and writes y and the row's mean and rstd; `keep(i, v)` writes
// y's low copy (ops::LayerNormLow, from f32 y only). `first(i, k)` reads x[i] (element k of
// the rows) the first time, `again(i, k)` later: x itself, or with an addend the sum it writes
// (ops::AddLayerNorm). Without a weight or a bias their bindings are placeholders, never read.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read> weight: array<S_x>;
@group(0) @binding(3) var<storage, read> bias: array<S_x>;
@group(0) @binding(4) var<storage, read_write> y: array<S_x>;
@group(0) @binding(5) var<storage, read_write> mean: array<S_x>;
@group(0) @binding(6) var<storage, read_write> rstd: array<S_x>;

fn run(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) {
  let at = row_lane(wid, nwg, lid);
  let row = at.x;
  let lane = at.y;
  // Uniform across the row's invocations: every one returns, or none does.
  if (row >= p.rows) { return; }
  let d = p.d;
  let base = offset(0u) + row * d;
  var s = 0.0;
  for (var j = lane; j < d; j += ROW_LANES) {
    s += first(base + j, row * d + j);
  }
  let mu = sum_all(lane, vec2<f32>(s, 0.0)).x / f32(d);
  var q = 0.0;
  for (var j = lane; j < d; j += ROW_LANES) {
    let e = again(base + j, row * d + j) - mu;
    q += e * e;
  }
  let variance = sum_all(lane, vec2<f32>(q, 0.0)).x / f32(d);
  let inv = 1.0 / sqrt(variance + p.eps);
  for (var j = lane; j < d; j += ROW_LANES) {
    var out = (again(base + j, row * d + j) - mu) * inv;
    if (flag(1u)) { out = out * f32(load_x(weight[offset(1u) + j])); }
    if (flag(2u)) { out = out + f32(load_x(bias[offset(2u) + j])); }
    y[row * d + j] = store_x(C_x(out));
    keep(row * d + j, out);
  }
  if (lane == 0u) {
    mean[row] = store_x(C_x(mu));
    rstd[row] = store_x(C_x(inv));
  }
}
