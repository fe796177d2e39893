// The gradient of max pooling: each input pixel gathers dy from every window that covers it
// and chose it (the window's index is the pixel's offset h*W + w in its plane), in output
// order, as the CPU backend adds them, so no two invocations write one place (no atomics).
// TILES: the windows tile the input (stride = kernel, no padding, no dilation: PyTorch's
// `MaxPool2d(k)`), so a pixel lies in at most one window, found by two divisions; the pixels
// past the last window of a row or column get zeros. A window wholly in the padding (index -1,
// low word 0xffffffff, past every offset) chose nothing. p.offset = dy's offset, p.extra[0] the
// indices' (in i64s, each two u32 words, low first; offsets in a plane fit the low word).

@group(0) @binding(1) var<storage, read> dy: array<S_x>;
@group(0) @binding(2) var<storage, read> indices: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> dx: array<S_x>;

// dy of window o where it chose pixel k, else zero.
fn chosen(o: u32, k: u32) -> C_x {
  if (indices[p.extra[0] + o].x == k) { return load_x(dy[p.offset + o]); }
  return C_x(0);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.invocations) { return; }
  let g = geo();
  let hw = g.h * g.w;
  let plane = e / hw;
  let k = e - plane * hw;
  var acc = C_x(0);
  if (TILES) {
    let iy = k / g.w;
    let y = iy / g.kh;
    let x = (k - iy * g.w) / g.kw;
    if (y < g.oh && x < g.ow) { acc = chosen((plane * g.oh + y) * g.ow + x, k); }
  } else {
    let hp = k / g.w + g.ph;
    let wp = k % g.w + g.pw;
    // Windows y whose taps reach padded row hp: y*sh <= hp <= y*sh + (kh - 1)*dh; likewise x.
    let reach_h = (g.kh - 1u) * g.dh;
    let reach_w = (g.kw - 1u) * g.dw;
    let y0 = select(0u, (hp - reach_h + g.sh - 1u) / g.sh, hp > reach_h);
    let y1 = min(hp / g.sh + 1u, g.oh);
    let x0 = select(0u, (wp - reach_w + g.sw - 1u) / g.sw, wp > reach_w);
    let x1 = min(wp / g.sw + 1u, g.ow);
    for (var y = y0; y < y1; y++) {
      for (var x = x0; x < x1; x++) {
        acc += chosen((plane * g.oh + y) * g.ow + x, k);
      }
    }
  }
  dx[e] = store_x(acc);
}
