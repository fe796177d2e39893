// ops::LstmCellBackward: from gates [N, 4H] (plus `more` when SUM), c [N, H], the
// forward's out [2, N, H] = (h', c') and the gradients dh' and dc' [N, H], the gradients
// dgates [N, 4H] and dc [N, H]. Meta: N * H, H, offsets of gates, c, out, dh', dc' and more.

@group(0) @binding(1) var<storage, read> gates: array<S_x>;
@group(0) @binding(2) var<storage, read> c: array<S_x>;
@group(0) @binding(3) var<storage, read> out: array<S_x>;
@group(0) @binding(4) var<storage, read> dh_new: array<S_x>;
@group(0) @binding(5) var<storage, read> dc_new: array<S_x>;
@group(0) @binding(6) var<storage, read> more: array<S_x>;
@group(0) @binding(7) var<storage, read_write> dgates: array<S_x>;
@group(0) @binding(8) var<storage, read_write> dc: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  let count = p.units;
  if (e >= count) { return; }
  let h = p.h;
  let a = gates_of(e);
  let tanh_c = tanh_(load_x(out[p.offsets[2] + count + e]));
  let dh = load_x(dh_new[p.offsets[3] + e]);
  // c' reaches the loss directly and through h' = o * tanh(c').
  let dc_total = load_x(dc_new[p.offsets[4] + e]) + dh * a.w * (1.0 - tanh_c * tanh_c);
  let at = (e / h) * 4u * h + e % h;
  dgates[at] = store_x(dc_total * a.z * a.x * (1.0 - a.x));
  dgates[at + h] = store_x(dc_total * load_x(c[p.offsets[1] + e]) * a.y * (1.0 - a.y));
  dgates[at + 2u * h] = store_x(dc_total * a.x * (1.0 - a.z * a.z));
  dgates[at + 3u * h] = store_x(dh * tanh_c * a.w * (1.0 - a.w));
  dc[e] = store_x(dc_total * a.y);
}
