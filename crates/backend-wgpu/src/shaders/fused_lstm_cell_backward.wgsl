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

fn in_gates_(j: u32) -> f32 { return load_x(gates[j]); }
fn in_more_(j: u32) -> f32 { return load_x(more[j]); }
fn in_c_(j: u32) -> f32 { return load_x(c[j]); }
fn in_out_(j: u32) -> f32 { return load_x(out[j]); }
fn in_dh_(j: u32) -> f32 { return load_x(dh_new[j]); }
fn in_dc_(j: u32) -> f32 { return load_x(dc_new[j]); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.units) { return; }
  let h = p.h;
  let g = grads_(e);
  let at = (e / h) * 4u * h + e % h;
  dgates[at] = store_x(g.dgates.x);
  dgates[at + h] = store_x(g.dgates.y);
  dgates[at + 2u * h] = store_x(g.dgates.z);
  dgates[at + 3u * h] = store_x(g.dgates.w);
  dc[e] = store_x(g.dc);
}
