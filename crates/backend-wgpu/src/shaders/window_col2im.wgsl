// The adjoint of im2col: each input pixel gathers the column entries of every window tap that
// lands on it, so no two invocations write one place (no atomics). Taps are summed in row
// order, as the CPU backend sums them.

@group(0) @binding(1) var<storage, read> cols: array<S_x>;
@group(0) @binding(2) var<storage, read_write> x: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.invocations) { return; }
  let g = geo();
  let l_len = g.oh * g.ow;
  let kk = g.kh * g.kw;
  let plane = e / (g.h * g.w);
  let hp = (e / g.w) % g.h + g.ph;
  let wp = e % g.w + g.pw;
  var acc = C_x(0);
  for (var i = 0u; i < g.kh && i * g.dh <= hp; i++) {
    let ys = hp - i * g.dh;
    let y = ys / g.sh;
    if (ys % g.sh != 0u || y >= g.oh) { continue; }
    for (var j = 0u; j < g.kw && j * g.dw <= wp; j++) {
      let xs = wp - j * g.dw;
      let xo = xs / g.sw;
      if (xs % g.sw != 0u || xo >= g.ow) { continue; }
      acc += load_x(cols[g.offset + (plane * kk + i * g.kw + j) * l_len + y * g.ow + xo]);
    }
  }
  x[e] = store_x(acc);
}
