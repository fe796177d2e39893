// ops::GeluBackward four elements an invocation (V_x = vec4<S_x>): dx = dy (Phi(x) + x phi(x)).
// `PointwiseParams`: p.numel = number of vec4s, p.offsets = the vec4 offsets of x and dy.

@group(0) @binding(1) var<storage, read> x: array<V_x>;
@group(0) @binding(2) var<storage, read> dy: array<V_x>;
@group(0) @binding(3) var<storage, read_write> dx: array<V_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let v = vec4<f32>(x[p.offsets[0] + e]);
  // phi(v) = exp(-v^2 / 2) / sqrt(2 pi)
  let pdf = exp(-0.5 * v * v) * 0.39894228040143268;
  let cdf = vec4<f32>(normal_cdf(v.x), normal_cdf(v.y), normal_cdf(v.z), normal_cdf(v.w));
  dx[e] = round_v(vec4<f32>(dy[p.offsets[1] + e]) * (cdf + v * pdf));
}
