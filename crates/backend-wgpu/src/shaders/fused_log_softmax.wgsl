// Shared by the fused softmax and log-softmax kernels: x (forward) or y and dy (backward) are
// [R, C], a row a workgroup of 64 invocations. `LogSoftmaxParams` (`fused_log_softmax.rs`):
// p.rows = R, p.width = C, the inputs' offsets in binding order.

fn row_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.y * nwg.x + wid.x;
}

var<workgroup> lanes: array<f32, 64>;

// The workgroup's largest value; every invocation gets it.
fn max_all(lid: u32, v: f32) -> f32 {
  lanes[lid] = v;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k = k >> 1u) {
    if (lid < k) {
      let a = lanes[lid];
      let b = lanes[lid + k];
      // NaN beats everything, as the composite's max.
      if (b > a || (!(b == b) && a == a)) { lanes[lid] = b; }
    }
    workgroupBarrier();
  }
  let r = lanes[0];
  workgroupBarrier();
  return r;
}

// The workgroup's values summed; every invocation gets the result.
fn sum_all(lid: u32, v: f32) -> f32 {
  lanes[lid] = v;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k = k >> 1u) {
    if (lid < k) { lanes[lid] = lanes[lid] + lanes[lid + k]; }
    workgroupBarrier();
  }
  let r = lanes[0];
  workgroupBarrier();
  return r;
}
