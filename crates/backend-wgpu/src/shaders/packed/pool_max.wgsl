// Max pooling on packed bf16 (pool_max_window.wgsl's walk over the words as stored): an
// invocation pools outputs 2w and 2w + 1 and writes value word w whole. Every tap is a bf16
// value, so the largest is exact. p.offset = x's element offset.

@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> values: array<u32>;
@group(0) @binding(3) var<storage, read_write> indices: array<vec2<u32>>;

fn tap_(e: u32) -> C_x { return widen_(x[e >> 1u], e); }

// Output o's value as bf16 bits (the low half), its index written.
fn pool_(o: u32, g: Geo) -> u32 {
  let t = max_tap(o, g);
  indices[o] = tap_index(t.at);
  return narrow_(t.v);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nwg, lid);
  let n = p.invocations;
  if (w >= (n + 1u) / 2u) { return; }
  let g = geo();
  var word = pool_(2u * w, g);
  if (2u * w + 1u < n) {
    word |= pool_(2u * w + 1u, g) << 16u;
  }
  values[w] = word;
}
