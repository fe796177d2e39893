// ops::AddRelu: y = relu(a + b) elementwise, the sum rounded to the dtype (round_v, from the
// file before this one) before the ReLU as the two ops round it; NaN gives 0. An element or
// four an invocation, as fused_relu.wgsl. `PointwiseParams`: p.numel = number of V_x items,
// p.offsets = the item offsets of a and b.

@group(0) @binding(1) var<storage, read> a: array<V_x>;
@group(0) @binding(2) var<storage, read> b: array<V_x>;
@group(0) @binding(3) var<storage, read_write> y: array<V_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let s = round_v(C_v(a[p.offsets[0] + e]) + C_v(b[p.offsets[1] + e]));
  y[e] = select(V_x(), s, C_v(s) > C_v());
}
