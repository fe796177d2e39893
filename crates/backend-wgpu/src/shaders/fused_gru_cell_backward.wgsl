// ops::GruCellBackward: from x_gates and h_gates [N, 3H], h [N, H] and the gradient dh'
// [N, H], the gradients of x_gates and h_gates [N, 3H] and of h [N, H]. Meta: N * H, H, offsets
// of x_gates, h_gates, h and dh'.

@group(0) @binding(1) var<storage, read> gx: array<S_x>;
@group(0) @binding(2) var<storage, read> gh: array<S_x>;
@group(0) @binding(3) var<storage, read> h: array<S_x>;
@group(0) @binding(4) var<storage, read> dh_new: array<S_x>;
@group(0) @binding(5) var<storage, read_write> dgx: array<S_x>;
@group(0) @binding(6) var<storage, read_write> dgh: array<S_x>;
@group(0) @binding(7) var<storage, read_write> dh: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.units) { return; }
  let w = p.h;
  let at = gru_at(e);
  let g = gru_gates(e);
  let r = g.x;
  let z = g.y;
  let n = g.z;
  let h_n = g.w;
  let d = load_x(dh_new[p.offsets[3] + e]);
  // h' = n + z (h - n).
  let dn_pre = d * (1.0 - z) * (1.0 - n * n);
  let dr_pre = dn_pre * h_n * r * (1.0 - r);
  let dz_pre = d * (load_x(h[p.offsets[2] + e]) - n) * z * (1.0 - z);
  dgx[at] = store_x(dr_pre);
  dgx[at + w] = store_x(dz_pre);
  dgx[at + 2u * w] = store_x(dn_pre);
  dgh[at] = store_x(dr_pre);
  dgh[at + w] = store_x(dz_pre);
  dgh[at + 2u * w] = store_x(dn_pre * r);
  dh[e] = store_x(d * z);
}
