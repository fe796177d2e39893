// ops::AddWide: y = a + b of an f32 a and an f16 b (S_x), written in f32: autocast's promoted
// sum, b widened exactly and the sum rounded once, as the cast and the add round it. An element
// or four an invocation (V_x, C_v). `PointwiseParams`: p.numel = number of items, p.offsets =
// the item offsets of a and b.

@group(0) @binding(1) var<storage, read> a: array<C_v>;
@group(0) @binding(2) var<storage, read> b: array<V_x>;
@group(0) @binding(3) var<storage, read_write> y: array<C_v>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  y[e] = a[p.offsets[0] + e] + C_v(b[p.offsets[1] + e]);
}
