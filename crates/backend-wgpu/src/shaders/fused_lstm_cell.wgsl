// ops::LstmCell: gates [N, 4H] (plus `more` [N, 4H] when SUM) and c [N, H] to out
// [2, N, H] = (h', c'), where c' = f * c + i * g and h' = o * tanh(c'). Meta: N * H, H,
// offsets of gates, c and more.

@group(0) @binding(1) var<storage, read> gates: array<S_x>;
@group(0) @binding(2) var<storage, read> c: array<S_x>;
@group(0) @binding(3) var<storage, read> more: array<S_x>;
@group(0) @binding(4) var<storage, read_write> out: array<S_x>;

fn in_gates_(j: u32) -> f32 { return load_x(gates[j]); }
fn in_more_(j: u32) -> f32 { return load_x(more[j]); }
fn in_c_(j: u32) -> f32 { return load_x(c[j]); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  let count = p.units;
  if (e >= count) { return; }
  let s = cell_(e);
  out[e] = store_x(s.x);
  out[count + e] = store_x(s.y);
}
