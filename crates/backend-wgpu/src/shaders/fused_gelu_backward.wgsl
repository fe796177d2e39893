// ops::GeluBackward: dx = dy (Phi(x) + x phi(x)) elementwise. `PointwiseParams`: p.numel = number of
// elements, p.offsets = the element offsets of x and dy.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read> dy: array<S_x>;
@group(0) @binding(3) var<storage, read_write> dx: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let v = load_x(x[p.offsets[0] + e]);
  // phi(v) = exp(-v^2 / 2) / sqrt(2 pi)
  let pdf = exp(-0.5 * v * v) * 0.39894228040143268;
  dx[e] = store_x(load_x(dy[p.offsets[1] + e]) * (normal_cdf(v) + v * pdf));
}
