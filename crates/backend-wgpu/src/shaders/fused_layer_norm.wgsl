// Shared by the fused layer-norm kernels: x is [R, D] (rows of the normalized width D).
// `LayerNormParams` (`fused_layer_norm.rs`): p.rows = R, p.d = D, p.flags (1 weight, 2 bias),
// p.eps, p.segments of rows and p.segment_rows a segment (the column sums of the backward),
// the inputs' offsets.
// The row kernels give each row a workgroup of 64 invocations.

fn flag(bit: u32) -> bool {
  return (p.flags & bit) != 0u;
}

fn offset(k: u32) -> u32 {
  return p.offsets[k];
}

// The row a workgroup of a row kernel serves (the grid may be two-dimensional).
fn row_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.y * nwg.x + wid.x;
}

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
