// The workgroup's sum through workgroup memory, a tree of six levels (no subgroup operations
// on this device), and the entry point of a row kernel.

var<workgroup> tree: array<vec2<f32>, 64>;

// The workgroup's values summed; every invocation gets the result.
fn sum_all(lid: u32, v: vec2<f32>) -> vec2<f32> {
  tree[lid] = v;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k = k >> 1u) {
    if (lid < k) { tree[lid] = tree[lid] + tree[lid + k]; }
    workgroupBarrier();
  }
  let r = tree[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  run(wid, nwg, lid);
}
