// ops::GruCell: x_gates and h_gates [N, 3H] (r, z, n) and h [N, H] to h' [N, H], where
// r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + r * h_n), h' = n + z (h - n).
// Meta: N * H, H, offsets of x_gates, h_gates and h.

@group(0) @binding(1) var<storage, read> gx: array<S_x>;
@group(0) @binding(2) var<storage, read> gh: array<S_x>;
@group(0) @binding(3) var<storage, read> h: array<S_x>;
@group(0) @binding(4) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.units) { return; }
  let g = gru_gates(e);
  let n = g.z;
  out[e] = store_x(n + g.y * (load_x(h[p.offsets[2] + e]) - n));
}
