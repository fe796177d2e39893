// ops::Attention, a head a workgroup: the scores s = q k^T * scale, their softmax p along the
// keys (written out for the backward), then o = p v, stored [N, L, H, Ev].

@group(0) @binding(1) var<storage, read> q: array<A_x>;
@group(0) @binding(2) var<storage, read> k: array<A_x>;
@group(0) @binding(3) var<storage, read> v: array<A_x>;
@group(0) @binding(4) var<storage, read_write> o: array<A_x>;
@group(0) @binding(5) var<storage, read_write> pr: array<P_>;

fn fetch(which: u32, i: u32) -> f32 {
  switch which {
    case 0u: { return val_(q[word_(i)], i); }
    case 1u: { return val_(k[word_(i)], i); }
    default: { return val_(v[word_(i)], i); }
  }
}

fn put(which: u32, i: u32, w: A_x) {
  o[i] = w;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let hd = head_of(wid, nwg);
  if (hd.z == 0u) { return; }
  let n = hd.x;
  let h = hd.y;
  let tx = lid % 16u;
  let ty = lid / 16u;
  product_staged(0u, elem(p.q, n, h, 0u, 0u), p.q[3], p.l, 1u, elem(p.k, n, h, 0u, 0u), p.k[3], p.s, p.e, tx, ty, lid);
  // The scores, -inf past the keys (rows past the queries are never stored).
  for (var t = 0u; t < 25u; t++) {
    var x = bitcast<f32>(0xff800000u);
    if (tx + 16u * (t % 5u) < p.s) { x = out_get(t) * p.scale; }
    xr_set(t, x);
  }
  var m: array<f32, 5>;
  for (var i = 0u; i < 5u; i++) {
    m[i] = xr_get(i * 5u);
    for (var j = 1u; j < 5u; j++) { m[i] = max(m[i], xr_get(i * 5u + j)); }
  }
  m = across(m, true, tx, ty);
  var total: array<f32, 5>;
  for (var i = 0u; i < 5u; i++) {
    total[i] = 0.0;
    for (var j = 0u; j < 5u; j++) {
      let e = exp(xr_get(i * 5u + j) - m[i]);
      xr_set(i * 5u + j, e);
      total[i] += e;
    }
  }
  total = across(total, false, tx, ty);
  for (var t = 0u; t < 25u; t++) {
    let row = ty + 16u * (t / 5u);
    let c = tx + 16u * (t % 5u);
    let x = xr_get(t) / total[t / 5u];
    xr_set(t, x);
    if (row < p.l && c < p.s) { pr[((n * p.h + h) * p.l + row) * p.s + c] = prob_(x); }
  }
  product_from_grid(false, 2u, elem(p.v, n, h, 0u, 0u), p.v[3], p.ev, p.s, tx, ty, lid);
  store_grid(0u, n, h, p.l, p.ev, tx, ty, lid);
}
