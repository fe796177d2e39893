// Max pooling: the largest tap of each window and its offset h*W + w in the plane. Padding
// never wins; NaN beats everything and ties keep the first tap, as the CPU backend. A window
// wholly in the padding yields -inf (p.extra[0] holds its bits) and index -1.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> values: array<S_x>;
@group(0) @binding(3) var<storage, read_write> indices: array<vec2<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = flat_id(wid, nwg, lid);
  if (o >= p.invocations) { return; }
  let g = geo();
  let l = o % (g.oh * g.ow);
  let base = g.offset + (o / (g.oh * g.ow)) * g.h * g.w;
  let hs = (l / g.ow) * g.sh;
  let ws = (l % g.ow) * g.sw;
  var best = C_x(bitcast<f32>(p.extra[0]));
  var at = 0xffffffffu;
  for (var i = 0u; i < g.kh; i++) {
    let hp = hs + i * g.dh;
    if (hp < g.ph) { continue; }
    if (hp - g.ph >= g.h) { break; }
    for (var j = 0u; j < g.kw; j++) {
      let wp = ws + j * g.dw;
      if (wp < g.pw) { continue; }
      if (wp - g.pw >= g.w) { break; }
      let k = (hp - g.ph) * g.w + wp - g.pw;
      let v = load_x(x[base + k]);
      // `!(v == v)` is the NaN test: `!=` compiles to an ordered comparison.
      if (at == 0xffffffffu || v > best || (!(v == v) && best == best)) {
        best = v;
        at = k;
      }
    }
  }
  values[o] = store_x(best);
  indices[o] = select(vec2<u32>(at, 0u), vec2<u32>(0xffffffffu), at == 0xffffffffu);
}
