// ops::Gelu: y = x Phi(x) elementwise. `PointwiseParams`: p.numel = number of elements, p.offsets[0] =
// the element offset of x.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let v = load_x(x[p.offsets[0] + e]);
  y[e] = store_x(v * normal_cdf(v));
}
