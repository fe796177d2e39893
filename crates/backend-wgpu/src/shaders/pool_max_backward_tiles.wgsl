// The gradient of max pooling whose windows tile the input (stride = kernel, no padding, no
// dilation: PyTorch's `MaxPool2d(k)`): each input pixel lies in at most one window, found by
// two divisions, and takes that window's dy where the window's index (the pixel's offset
// h*W + w in its plane) points at it, else zero; the pixels past the last window of a row or
// column too. pool_max_backward.wgsl is the general gather over every covering window.
// params[13] = dy's offset, [14] the indices' (i64s as two u32 words, low first; offsets in a
// plane fit the low word).

@group(0) @binding(1) var<storage, read> dy: array<S_x>;
@group(0) @binding(2) var<storage, read> indices: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> dx: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= params[0]) { return; }
  let g = geo();
  let hw = g.h * g.w;
  let plane = e / hw;
  let k = e - plane * hw;
  let iy = k / g.w;
  let y = iy / g.kh;
  let x = (k - iy * g.w) / g.kw;
  var v = C_x(0);
  if (y < g.oh && x < g.ow) {
    let o = (plane * g.oh + y) * g.ow + x;
    if (indices[params[14] + o].x == k) { v = load_x(dy[g.offset + o]); }
  }
  dx[e] = store_x(v);
}
