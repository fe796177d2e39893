// Max pooling's window walk, shared by pool_max.wgsl and packed/pool_max.wgsl: the largest tap
// of output o's window and its offset h*W + w in the plane, element e read by the including
// shader's tap_(e). Padding never wins; NaN beats everything and ties keep the first tap, as
// the CPU backend. A window wholly in the padding yields -inf (p.extra[0] holds its bits) and
// index -1.

struct MaxTap {
  v: C_x,
  at: u32,
}

fn max_tap(o: u32, g: Geo) -> MaxTap {
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
      let v = tap_(base + k);
      // `!(v == v)` is the NaN test: `!=` compiles to an ordered comparison.
      if (at == 0xffffffffu || v > best || (!(v == v) && best == best)) {
        best = v;
        at = k;
      }
    }
  }
  return MaxTap(best, at);
}

// The i64 index of a tap as two words, low first: -1 where the window chose none.
fn tap_index(at: u32) -> vec2<u32> {
  return select(vec2<u32>(at, 0u), vec2<u32>(0xffffffffu), at == 0xffffffffu);
}
