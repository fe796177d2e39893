// ops::ReluBackward: dx = y > 0 ? dy : 0 elementwise, from ReLU's output y; an element or
// four an invocation, as fused_relu.wgsl. `PointwiseParams`: p.numel = number of V_x items,
// p.offsets = the item offsets of y and dy.

@group(0) @binding(1) var<storage, read> y: array<V_x>;
@group(0) @binding(2) var<storage, read> dy: array<V_x>;
@group(0) @binding(3) var<storage, read_write> dx: array<V_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  dx[e] = select(V_x(), dy[p.offsets[1] + e], C_v(y[p.offsets[0] + e]) > C_v());
}
