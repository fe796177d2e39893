// Max pooling: the largest tap of each window and its offset (pool_max_window.wgsl).

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> values: array<S_x>;
@group(0) @binding(3) var<storage, read_write> indices: array<vec2<u32>>;

fn tap_(e: u32) -> C_x { return load_x(x[e]); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = flat_id(wid, nwg, lid);
  if (o >= p.invocations) { return; }
  let t = max_tap(o, geo());
  values[o] = store_x(t.v);
  indices[o] = tap_index(t.at);
}
