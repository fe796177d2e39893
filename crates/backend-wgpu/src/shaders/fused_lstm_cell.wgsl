// ops::LstmCell: gates [N, 4H] (plus `more` [N, 4H] when SUM) and c [N, H] to out
// [2, N, H] = (h', c'), where c' = f * c + i * g and h' = o * tanh(c'). Meta: N * H, H,
// offsets of gates, c and more.

@group(0) @binding(1) var<storage, read> gates: array<S_x>;
@group(0) @binding(2) var<storage, read> c: array<S_x>;
@group(0) @binding(3) var<storage, read> more: array<S_x>;
@group(0) @binding(4) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  let count = p.units;
  if (e >= count) { return; }
  let a = gates_of(e);
  let c_new = a.y * load_x(c[p.offsets[1] + e]) + a.x * a.z;
  out[e] = store_x(a.w * tanh_(c_new));
  out[count + e] = store_x(c_new);
}
