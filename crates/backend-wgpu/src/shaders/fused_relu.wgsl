// ops::Relu: y = x > 0 ? x : 0 elementwise (NaN gives 0, as the composite's select does),
// an element (V_x = S_x) or four (V_x = vec4<S_x>, C_v the f32 vector) an invocation. Meta:
// `PointwiseParams`: p.numel = number of V_x items, p.offsets[0] = the item offset of x.

@group(0) @binding(1) var<storage, read> x: array<V_x>;
@group(0) @binding(2) var<storage, read_write> y: array<V_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let v = x[p.offsets[0] + e];
  y[e] = select(V_x(), v, C_v(v) > C_v());
}
