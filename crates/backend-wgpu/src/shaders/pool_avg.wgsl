// Average pooling, one invocation per output; p.extra[0] = count_include_pad. Taps are summed
// row by row in the compute type, as the CPU backend does.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = flat_id(wid, nwg, lid);
  if (o >= p.invocations) { return; }
  let g = geo();
  let l = o % (g.oh * g.ow);
  let base = g.offset + (o / (g.oh * g.ow)) * g.h * g.w;
  let win = avg_window(g, l / g.ow, l % g.ow, p.extra[0] != 0u);
  var sum = C_x(0);
  for (var h = win.h0; h < win.h1; h++) {
    for (var w = win.w0; w < win.w1; w++) {
      sum += load_x(x[base + h * g.w + w]);
    }
  }
  y[o] = store_x(select(sum / C_x(win.count), C_x(0), win.count == 0u));
}
