// Max pooling on packed bf16 (`pool_max.wgsl` over the words as stored): an invocation pools
// outputs 2w and 2w + 1 and writes value word w whole. Every tap is a bf16 value, so the
// largest is exact. p.offset = x's element offset.

@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> values: array<u32>;
@group(0) @binding(3) var<storage, read_write> indices: array<vec2<u32>>;

// Output o's value as bf16 bits (low half), its index written.
fn pool_(o: u32, g: Geo) -> u32 {
  let l = o % (g.oh * g.ow);
  let base = g.offset + (o / (g.oh * g.ow)) * g.h * g.w;
  let hs = (l / g.ow) * g.sh;
  let ws = (l % g.ow) * g.sw;
  var best = bitcast<f32>(p.extra[0]);
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
      let e = base + k;
      let v = widen_(x[e >> 1u], e);
      // `!(v == v)` is the NaN test: `!=` compiles to an ordered comparison.
      if (at == 0xffffffffu || v > best || (!(v == v) && best == best)) {
        best = v;
        at = k;
      }
    }
  }
  indices[o] = select(vec2<u32>(at, 0u), vec2<u32>(0xffffffffu), at == 0xffffffffu);
  return narrow_(best);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nwg, lid);
  let n = p.invocations;
  if (w >= (n + 1u) / 2u) { return; }
  let g = geo();
  var word = pool_(2u * w, g);
  if (2u * w + 1u < n) {
    word |= pool_(2u * w + 1u, g) << 16u;
  }
  values[w] = word;
}
