// The gradient of max pooling on packed bf16 (`pool_max_backward.wgsl` over the words as
// stored): an invocation gathers input pixels 2w and 2w + 1, summed in f32 and rounded once,
// and writes dx word w whole. p.offset = dy's element offset, p.extra[0] the indices'.

@group(0) @binding(1) var<storage, read> dy: array<u32>;
@group(0) @binding(2) var<storage, read> indices: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> dx: array<u32>;

// dy of window o where it chose pixel k, else zero.
fn chosen(o: u32, k: u32) -> f32 {
  if (indices[p.extra[0] + o].x == k) {
    let e = p.offset + o;
    return widen_(dy[e >> 1u], e);
  }
  return 0.0;
}

// Input pixel e's gradient.
fn gather_(e: u32, g: Geo) -> f32 {
  let hw = g.h * g.w;
  let plane = e / hw;
  let k = e - plane * hw;
  var acc = 0.0;
  if (TILES) {
    let iy = k / g.w;
    let y = iy / g.kh;
    let x = (k - iy * g.w) / g.kw;
    if (y < g.oh && x < g.ow) { acc = chosen((plane * g.oh + y) * g.ow + x, k); }
  } else {
    let hp = k / g.w + g.ph;
    let wp = k % g.w + g.pw;
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nwg, lid);
  let n = p.invocations;
  if (w >= (n + 1u) / 2u) { return; }
  let g = geo();
  var word = narrow_(gather_(2u * w, g));
  if (2u * w + 1u < n) {
    word |= narrow_(gather_(2u * w + 1u, g)) << 16u;
  }
  dx[w] = word;
}
