// Max pooling's gradient at one input pixel, shared by pool_max_backward.wgsl and
// packed/pool_max_backward.wgsl: the pixel gathers dy from every window that covers it and
// chose it (the window's index is the pixel's offset h*W + w in its plane), in output order,
// as the CPU backend adds them, so no two invocations write one place (no atomics). dy's
// element i is read by the including shader's dy_(i), the indices from its `indices`.
// TILES: the windows tile the input (stride = kernel, no padding, no dilation: PyTorch's
// `MaxPool2d(k)`), so a pixel lies in at most one window, found by two divisions; the pixels
// past the last window of a row or column get zeros. A window wholly in the padding (index -1,
// low word 0xffffffff, past every offset) chose nothing. p.offset = dy's offset, p.extra[0] the
// indices' (in i64s, each two u32 words, low first; offsets in a plane fit the low word).

// dy of window o where it chose pixel k, else zero.
fn chosen(o: u32, k: u32) -> C_x {
  if (indices[p.extra[0] + o].x == k) { return dy_(p.offset + o); }
  return C_x(0);
}

// Input pixel e's gradient.
fn gather_(e: u32, g: Geo) -> C_x {
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
  return acc;
}
