// ops::BceLoss: l = -(y log_(p) + (1 - y) log_(1 - p)) elementwise, log_ the log clamped at
// -100 (and -100 at and below 0), as the composite's. `PointwiseParams`: p.numel = number of elements,
// p.offsets = the element offsets of prob and y.

@group(0) @binding(1) var<storage, read> prob: array<S_x>;
@group(0) @binding(2) var<storage, read> y: array<S_x>;
@group(0) @binding(3) var<storage, read_write> l: array<S_x>;

fn clamped_log(v: f32) -> f32 {
  if (v > 0.0) { return max(log(v), -100.0); }
  return -100.0;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let pv = load_x(prob[p.offsets[0] + e]);
  let yv = load_x(y[p.offsets[1] + e]);
  l[e] = store_x(-(yv * clamped_log(pv) + (1.0 - yv) * clamped_log(1.0 - pv)));
}
