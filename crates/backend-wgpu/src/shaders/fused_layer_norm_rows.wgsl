// A row a subgroup: a row's sum is its subgroup's, with no workgroup memory or barrier; and
// the entry point of a row kernel. The workgroup's 64 invocations take 64 / ROW_LANES rows.

// The row's values summed over its lanes; every lane gets the result.
fn sum_all(lane: u32, v: vec2<f32>) -> vec2<f32> {
  return subgroupAdd(v);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  run(wid, nwg, lid);
}
