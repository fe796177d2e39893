// Shared by the fused layer-norm kernels: x is [R, D] (rows of the normalized width D).
// `LayerNormParams` (`fused_layer_norm.rs`): p.rows = R, p.d = D, p.flags (1 weight, 2 bias),
// p.eps, p.segments of rows and p.segment_rows a segment (the column sums of the backward),
// the inputs' offsets.
// The row kernels give each row a workgroup of 64 invocations, or a subgroup where the device's
// subgroups have one size; `sum_all` adds up a row's values (fused_layer_norm_tree.wgsl,
// _subgroup.wgsl or _rows.wgsl), and the entry point that calls `run` comes with it.

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

// The row and the lane in it of invocation lid of a row kernel: a workgroup a row (ROW_LANES
// 64), or a subgroup a row (ROW_LANES the subgroup's size, consecutive invocations).
fn row_lane(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> vec2<u32> {
  return vec2<u32>(row_of(wid, nwg) * (64u / ROW_LANES) + lid / ROW_LANES, lid % ROW_LANES);
}
