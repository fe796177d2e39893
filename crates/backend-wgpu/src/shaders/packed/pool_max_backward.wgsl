// The gradient of max pooling on packed bf16 (pool_max_backward_gather.wgsl over the words as
// stored): an invocation gathers input pixels 2w and 2w + 1, each summed in f32 and rounded
// once, and writes dx word w whole.

@group(0) @binding(1) var<storage, read> dy: array<u32>;
@group(0) @binding(2) var<storage, read> indices: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> dx: array<u32>;

fn dy_(i: u32) -> C_x { return widen_(dy[i >> 1u], i); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nwg, lid);
  let n = p.invocations;
  if (w >= (n + 1u) / 2u) { return; }
  let g = geo();
  var word = narrow_(gather_(2u * w, g));
  if (2u * w + 1u < n) {
    word |= narrow_(gather_(2u * w + 1u, g)) << 16u;
  }
  dx[w] = word;
}
