// cols[n, c*kh*kw + i*kw + j, y*out_w + x] = x[n, c, y*sh + i*dh - ph, x*sw + j*dw - pw], or
// the pad value (PyTorch's unfold). One invocation per column element.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> cols: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = flat_id(wid, nwg, lid);
  if (o >= p.invocations) { return; }
  let g = geo();
  let l_len = g.oh * g.ow;
  let kk = g.kh * g.kw;
  let l = o % l_len;
  let r = (o / l_len) % kk;
  let plane = o / (l_len * kk);
  let hp = (l / g.ow) * g.sh + (r / g.kw) * g.dh;
  let wp = (l % g.ow) * g.sw + (r % g.kw) * g.dw;
  var v: S_x = pad_();
  if (hp >= g.ph && hp - g.ph < g.h && wp >= g.pw && wp - g.pw < g.w) {
    v = x[g.offset + (plane * g.h + hp - g.ph) * g.w + wp - g.pw];
  }
  cols[o] = v;
}
