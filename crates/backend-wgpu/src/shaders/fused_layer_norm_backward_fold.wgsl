// ops::LayerNormBackward, the rows and the first pass of the parameters' gradients in one
// kernel, where a subgroup takes a row (ROW_LANES lanes, the device's one subgroup size) of at
// most SLOTS ROW_LANES elements: workgroup s takes the WG / ROW_LANES rows of segment s, a row
// to a subgroup, writes each row's dx as fused_layer_norm_backward.wgsl does, and sums dy xhat
// and dy down the segment's columns through workgroup memory into partial[s D + column] for
// the join, where the column-sum kernel would read x and dy again. Slot k of a lane is column
// lane + ROW_LANES k. `summed(i, v)` and `keep(i, v)` as in the rows' kernel, and its bindings
// (fused_layer_norm_backward_io.wgsl).

@group(0) @binding(PARTIAL_BINDING) var<storage, read_write> partial: array<vec2<f32>>;

const GROUP_ROWS: u32 = 256u / ROW_LANES;
// A segment's column terms, a row of them a subgroup.
var<workgroup> terms: array<vec2<f32>, 256u * SLOTS>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = row_of(wid, nwg);
  let sg = lid / ROW_LANES;
  let lane = lid % ROW_LANES;
  let d = p.d;
  let row = s * GROUP_ROWS + sg;
  // A subgroup past the last row adds zeros, and still meets the barrier.
  let live = row < p.rows;
  let base = row * d;
  var mu = 0.0;
  var inv = 0.0;
  if (live) {
    mu = f32(load_x(mean[offset(2u) + row]));
    inv = f32(load_x(rstd[offset(3u) + row]));
  }
  var xhat: array<f32, SLOTS>;
  var e: array<f32, SLOTS>;
  var w: array<f32, SLOTS>;
  var part = vec2<f32>(0.0);
  for (var k = 0u; k < SLOTS; k++) {
    let j = lane + ROW_LANES * k;
    xhat[k] = 0.0;
    e[k] = 0.0;
    w[k] = 1.0;
    if (live && j < d) {
      xhat[k] = (f32(load_x(x[offset(0u) + base + j])) - mu) * inv;
      e[k] = f32(load_x(dy[offset(1u) + base + j]));
      if (flag(1u)) { w[k] = f32(load_x(weight[offset(4u) + j])); }
      let g = e[k] * w[k];
      part += vec2<f32>(g, g * xhat[k]);
    }
  }
  let sums = subgroupAdd(part) / f32(d);
  for (var k = 0u; k < SLOTS; k++) {
    let j = lane + ROW_LANES * k;
    if (live && j < d) {
      let v = summed(base + j, f32(C_x(inv * (e[k] * w[k] - sums.x - xhat[k] * sums.y))));
      dx[base + j] = store_x(C_x(v));
      keep(base + j, v);
    }
    terms[sg * ROW_LANES * SLOTS + j] = vec2<f32>(e[k] * xhat[k], e[k]);
  }
  workgroupBarrier();
  // Invocation c adds column c's terms over the segment's rows, in row order.
  for (var c = lid; c < d; c += 256u) {
    var total = vec2<f32>(0.0);
    for (var r = 0u; r < GROUP_ROWS; r++) {
      total += terms[r * ROW_LANES * SLOTS + c];
    }
    partial[s * d + c] = total;
  }
}
