// ops::AttentionBackward: dv = p^T do, dp = do v^T, ds = p (dp - sum(p dp)) * scale along the
// keys, then dq = ds k and dk = ds^T q, stored [N, L, H, E], [N, S, H, E] and [N, S, H, Ev];
// where p.joined (ops::AttentionBackwardJoined) into one [N, L, 3, H, E] bound as dq. SIDES
// workgroups a head: with 1, one takes it all; with 2, both compute ds, then the first (the
// query side) dq and the second dv and dk; with 3, the first dq, the second dk (both computing
// ds) and the third dv alone, which needs no ds. A ViT's 384 heads, a workgroup each, filled
// two waves of two workgroups a multiprocessor (their registers), the second half empty; more
// a head spread the work, at the cost of dp computed twice.

@group(0) @binding(1) var<storage, read> q: array<A_x>;
@group(0) @binding(2) var<storage, read> k: array<A_x>;
@group(0) @binding(3) var<storage, read> v: array<A_x>;
@group(0) @binding(4) var<storage, read> g: array<A_x>;
@group(0) @binding(5) var<storage, read> pr: array<A_x>;
@group(0) @binding(6) var<storage, read_write> dq: array<A_x>;
@group(0) @binding(7) var<storage, read_write> dk: array<A_x>;
@group(0) @binding(8) var<storage, read_write> dv: array<A_x>;

fn fetch(which: u32, i: u32) -> f32 {
  switch which {
    case 0u: { return val_(q[word_(i)], i); }
    case 1u: { return val_(k[word_(i)], i); }
    case 2u: { return val_(v[word_(i)], i); }
    default: { return val_(g[word_(i)], i); }
  }
}

// Joined (p.joined), all three results go to dq's binding.
fn put(which: u32, i: u32, w: A_x) {
  if (p.joined != 0u) {
    dq[i] = w;
    return;
  }
  switch which {
    case 0u: { dq[i] = w; }
    case 1u: { dk[i] = w; }
    default: { dv[i] = w; }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  // Uniform: the side depends on the workgroup alone.
  let heads = p.n * p.h;
  let g = wid.y * nwg.x + wid.x;
  if (g >= SIDES * heads) { return; }
  let side = g / heads;
  let query_side = SIDES == 1u || side == 0u;
  let key_side = SIDES == 1u || side == 1u;
  let value_side = SIDES == 1u || side == SIDES - 1u;
  let n = (g % heads) / p.h;
  let h = (g % heads) % p.h;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let qb = elem(p.q, n, h, 0u, 0u);
  let kb = elem(p.k, n, h, 0u, 0u);
  let gb = elem(p.g, n, h, 0u, 0u);
  // p first, and (on the value side) dv = p^T do from it; then ds replaces p in xr, so no more
  // than two grids are held at once (fewer registers: more workgroups a multiprocessor).
  for (var t = 0u; t < 25u; t++) {
    let row = ty + 16u * (t / 5u);
    let c = tx + 16u * (t % 5u);
    var x = 0.0;
    if (row < p.l && c < p.s) {
      let i = elem(p.pr, n, h, row, c);
      x = val_(pr[word_(i)], i);
    }
    xr_set(t, x);
  }
  if (value_side) {
    product_from_grid(true, 3u, gb, p.g[3], p.ev, p.l, tx, ty, lid);
    store_grid(2u, n, h, p.s, p.ev, tx, ty, lid);
    if (!query_side && !key_side) { return; }
  }
  product_staged(3u, gb, p.g[3], p.l, 2u, elem(p.v, n, h, 0u, 0u), p.v[3], p.s, p.ev, tx, ty, lid);
  var along: array<f32, 5>;
  for (var i = 0u; i < 5u; i++) {
    along[i] = 0.0;
    for (var j = 0u; j < 5u; j++) { along[i] += xr_get(i * 5u + j) * out_get(i * 5u + j); }
  }
  along = across(along, false, tx, ty);
  for (var t = 0u; t < 25u; t++) {
    xr_set(t, xr_get(t) * (out_get(t) - along[t / 5u]) * p.scale);
  }
  if (query_side) {
    product_from_grid(false, 1u, kb, p.k[3], p.e, p.s, tx, ty, lid);
    store_grid(0u, n, h, p.l, p.e, tx, ty, lid);
  }
  if (key_side) {
    product_from_grid(true, 0u, qb, p.q[3], p.e, p.l, tx, ty, lid);
    store_grid(1u, n, h, p.s, p.e, tx, ty, lid);
  }
}
