// ops::LstmCellBackward (fused_lstm_cell_backward.wgsl) on packed bf16 (words.wgsl): operands
// read as stored, the gradients written a word at a time, so one invocation runs the units
// 2w and 2w + 1 (H is even, so they share a row and each gate's pair starts on a word).

@group(0) @binding(1) var<storage, read> gates: array<u32>;
@group(0) @binding(2) var<storage, read> c: array<u32>;
@group(0) @binding(3) var<storage, read> out: array<u32>;
@group(0) @binding(4) var<storage, read> dh_new: array<u32>;
@group(0) @binding(5) var<storage, read> dc_new: array<u32>;
@group(0) @binding(6) var<storage, read> more: array<u32>;
@group(0) @binding(7) var<storage, read_write> dgates: array<u32>;
@group(0) @binding(8) var<storage, read_write> dc: array<u32>;

fn in_gates_(j: u32) -> f32 { return widen_(gates[j >> 1u], j); }
fn in_more_(j: u32) -> f32 { return widen_(more[j >> 1u], j); }
fn in_c_(j: u32) -> f32 { return widen_(c[j >> 1u], j); }
fn in_out_(j: u32) -> f32 { return widen_(out[j >> 1u], j); }
fn in_dh_(j: u32) -> f32 { return widen_(dh_new[j >> 1u], j); }
fn in_dc_(j: u32) -> f32 { return widen_(dc_new[j >> 1u], j); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nwg, lid);
  let e = 2u * w;
  if (e >= p.units) { return; }
  let h = p.h;
  let g0 = grads_(e);
  let g1 = grads_(e + 1u);
  let at = ((e / h) * 4u * h + e % h) / 2u;
  let hw = h / 2u;
  dgates[at] = narrow2_(g0.dgates.x, g1.dgates.x);
  dgates[at + hw] = narrow2_(g0.dgates.y, g1.dgates.y);
  dgates[at + 2u * hw] = narrow2_(g0.dgates.z, g1.dgates.z);
  dgates[at + 3u * hw] = narrow2_(g0.dgates.w, g1.dgates.w);
  dc[w] = narrow2_(g0.dc, g1.dc);
}
