// The adjoint of average pooling: each input pixel gathers dy / divisor from every window that
// covers it (no atomics), in output order, as the CPU backend adds them. p.extra[0] =
// count_include_pad; the offset (p.offset) is dy's.

@group(0) @binding(1) var<storage, read> dy: array<S_x>;
@group(0) @binding(2) var<storage, read_write> dx: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.invocations) { return; }
  let g = geo();
  let plane = e / (g.h * g.w);
  let hp = (e / g.w) % g.h + g.ph;
  let wp = e % g.w + g.pw;
  // Windows y with y*sh <= hp < y*sh + kh, likewise x.
  let y0 = select(0u, (hp + 1u - g.kh + g.sh - 1u) / g.sh, hp + 1u > g.kh);
  let y1 = min(hp / g.sh + 1u, g.oh);
  let x0 = select(0u, (wp + 1u - g.kw + g.sw - 1u) / g.sw, wp + 1u > g.kw);
  let x1 = min(wp / g.sw + 1u, g.ow);
  let include_pad = p.extra[0] != 0u;
  var acc = C_x(0);
  for (var y = y0; y < y1; y++) {
    for (var x = x0; x < x1; x++) {
      let count = avg_window(g, y, x, include_pad).count;
      if (count != 0u) {
        acc += load_x(dy[g.offset + (plane * g.oh + y) * g.ow + x]) / C_x(count);
      }
    }
  }
  dx[e] = store_x(acc);
}
