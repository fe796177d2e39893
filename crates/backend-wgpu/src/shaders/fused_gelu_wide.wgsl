// ops::Gelu four elements an invocation (V_x = vec4<S_x>): y = x Phi(x). `PointwiseParams`:
// p.numel = number of vec4s, p.offsets[0] = the vec4 offset of x.

@group(0) @binding(1) var<storage, read> x: array<V_x>;
@group(0) @binding(2) var<storage, read_write> y: array<V_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let v = vec4<f32>(x[p.offsets[0] + e]);
  y[e] = round_v(v * vec4<f32>(normal_cdf(v.x), normal_cdf(v.y), normal_cdf(v.z), normal_cdf(v.w)));
}
