// The workgroup's sum by subgroup operations: each subgroup's sum, then those few sums through
// workgroup memory (one barrier where the tree takes seven), and the entry point of a row
// kernel. A workgroup's subgroups are its runs of `sg_size_` consecutive invocations, as on
// the GPUs wgpu drives.

var<workgroup> tree: array<vec2<f32>, 64>;
var<private> sg_lane_: u32;
var<private> sg_size_: u32;

// The workgroup's values summed; every invocation gets the result.
fn sum_all(lid: u32, v: vec2<f32>) -> vec2<f32> {
  let s = subgroupAdd(v);
  if (sg_lane_ == 0u) { tree[lid / sg_size_] = s; }
  workgroupBarrier();
  var r = tree[0];
  for (var i = 1u; i < 64u / sg_size_; i++) { r += tree[i]; }
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) size: u32) {
  sg_lane_ = lane;
  sg_size_ = size;
  run(wid, nwg, lid);
}
