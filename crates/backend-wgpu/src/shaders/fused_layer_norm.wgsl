// Shared by the fused layer-norm kernels: x is [R, D] (rows of the normalized width D).
// `LayerNormParams` (`fused_layer_norm.rs`): p.rows = R, p.d = D, p.flags (1 weight, 2 bias),
// p.eps, p.segments of rows and p.segment_rows a segment (the column sums of the backward),
// the inputs' offsets.
// The row kernels give each row a workgroup of 64 invocations; `sum_all` adds up their values
// (fused_layer_norm_tree.wgsl or fused_layer_norm_subgroup.wgsl), and the entry point that
// calls `run` comes with it.

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
