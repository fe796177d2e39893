// ops::AttentionBackward, a head a workgroup: dp = do v^T, ds = p (dp - sum(p dp)) * scale
// along the keys, then dq = ds k, dk = ds^T q and dv = p^T do, stored [N, L, H, E], [N, S, H,
// E] and [N, S, H, Ev].

@group(0) @binding(1) var<storage, read> q: array<S_x>;
@group(0) @binding(2) var<storage, read> k: array<S_x>;
@group(0) @binding(3) var<storage, read> v: array<S_x>;
@group(0) @binding(4) var<storage, read> g: array<S_x>;
@group(0) @binding(5) var<storage, read> pr: array<S_x>;
@group(0) @binding(6) var<storage, read_write> dq: array<S_x>;
@group(0) @binding(7) var<storage, read_write> dk: array<S_x>;
@group(0) @binding(8) var<storage, read_write> dv: array<S_x>;

fn fetch(which: u32, i: u32) -> f32 {
  switch which {
    case 0u: { return f32(load_x(q[i])); }
    case 1u: { return f32(load_x(k[i])); }
    case 2u: { return f32(load_x(v[i])); }
    default: { return f32(load_x(g[i])); }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let hd = head_of(wid, nwg);
  if (hd.z == 0u) { return; }
  let n = hd.x;
  let h = hd.y;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let qb = elem(p.q, n, h, 0u, 0u);
  let kb = elem(p.k, n, h, 0u, 0u);
  let gb = elem(p.g, n, h, 0u, 0u);
  product_staged(3u, gb, p.g[3], p.l, 2u, elem(p.v, n, h, 0u, 0u), p.v[3], p.s, p.ev, tx, ty, lid);
  for (var t = 0u; t < 25u; t++) {
    let row = ty + 16u * (t / 5u);
    let c = tx + 16u * (t % 5u);
    var x = 0.0;
    if (row < p.l && c < p.s) { x = f32(load_x(pr[elem(p.pr, n, h, row, c)])); }
    xr_set(t, x);
  }
  var along: array<f32, 5>;
  for (var i = 0u; i < 5u; i++) {
    along[i] = 0.0;
    for (var j = 0u; j < 5u; j++) { along[i] += xr_get(i * 5u + j) * out_get(i * 5u + j); }
  }
  along = across(along, false, tx, ty);
  for (var t = 0u; t < 25u; t++) {
    ds_set(t, xr_get(t) * (out_get(t) - along[t / 5u]) * p.scale);
  }
  product_from_grid(true, false, 1u, kb, p.k[3], p.e, p.s, tx, ty, lid);
  for (var t = 0u; t < 25u; t++) {
    let row = ty + 16u * (t / 5u);
    let c = tx + 16u * (t % 5u);
    if (row < p.l && c < p.e) { dq[((n * p.l + row) * p.h + h) * p.e + c] = store_x(C_x(out_get(t))); }
  }
  product_from_grid(true, true, 0u, qb, p.q[3], p.e, p.l, tx, ty, lid);
  for (var t = 0u; t < 25u; t++) {
    let row = ty + 16u * (t / 5u);
    let c = tx + 16u * (t % 5u);
    if (row < p.s && c < p.e) { dk[((n * p.s + row) * p.h + h) * p.e + c] = store_x(C_x(out_get(t))); }
  }
  product_from_grid(false, true, 3u, gb, p.g[3], p.ev, p.l, tx, ty, lid);
  for (var t = 0u; t < 25u; t++) {
    let row = ty + 16u * (t / 5u);
    let c = tx + 16u * (t % 5u);
    if (row < p.s && c < p.ev) { dv[((n * p.s + row) * p.h + h) * p.ev + c] = store_x(C_x(out_get(t))); }
  }
}
