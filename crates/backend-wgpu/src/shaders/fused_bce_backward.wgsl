// ops::BceLossBackward: dp = g ((1 - y) log_'(1 - p) - y log_'(p)) elementwise, log_'(v)
// being 1 / v where v > 0 and ln v >= -100, else 0 (the composite's rule). `PointwiseParams`: p.numel =
// number of elements, p.offsets = the element offsets of prob, y and g.

@group(0) @binding(1) var<storage, read> prob: array<S_x>;
@group(0) @binding(2) var<storage, read> y: array<S_x>;
@group(0) @binding(3) var<storage, read> g: array<S_x>;
@group(0) @binding(4) var<storage, read_write> dp: array<S_x>;

fn log_slope(v: f32) -> f32 {
  if (v > 0.0 && log(v) >= -100.0) { return 1.0 / v; }
  return 0.0;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let pv = load_x(prob[p.offsets[0] + e]);
  let yv = load_x(y[p.offsets[1] + e]);
  let gv = load_x(g[p.offsets[2] + e]);
  dp[e] = store_x(gv * ((1.0 - yv) * log_slope(1.0 - pv) - yv * log_slope(pv)));
}
