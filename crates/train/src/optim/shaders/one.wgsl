// The entry point of a per-tensor fused optimizer update: one invocation per element of the
// one tensor bound, `p.n` elements.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.n) { return; }
  update(e);
}
