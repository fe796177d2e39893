// ops::LstmCell (fused_lstm_cell.wgsl) on packed bf16 (words.wgsl): operands read as stored,
// and out written a word at a time, so one invocation runs the units 2w and 2w + 1 (H is
// even, so they share a row, and out's halves of h' and c' start on a word).

@group(0) @binding(1) var<storage, read> gates: array<u32>;
@group(0) @binding(2) var<storage, read> c: array<u32>;
@group(0) @binding(3) var<storage, read> more: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;

fn in_gates_(j: u32) -> f32 { return widen_(gates[j >> 1u], j); }
fn in_more_(j: u32) -> f32 { return widen_(more[j >> 1u], j); }
fn in_c_(j: u32) -> f32 { return widen_(c[j >> 1u], j); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nwg, lid);
  let count = p.units;
  if (2u * w >= count) { return; }
  let s0 = cell_(2u * w);
  let s1 = cell_(2u * w + 1u);
  out[w] = narrow2_(s0.x, s1.x);
  out[count / 2u + w] = narrow2_(s0.y, s1.y);
}
