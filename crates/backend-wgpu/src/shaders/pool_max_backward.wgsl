// The gradient of max pooling: a pixel an invocation (pool_max_backward_gather.wgsl).

@group(0) @binding(1) var<storage, read> dy: array<S_x>;
@group(0) @binding(2) var<storage, read> indices: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> dx: array<S_x>;

fn dy_(i: u32) -> C_x { return load_x(dy[i]); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.invocations) { return; }
  dx[e] = store_x(gather_(e, geo()));
}
