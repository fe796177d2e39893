// ops::LogSoftmaxLastDimBackward, or with SOFTMAX ops::SoftmaxLastDimBackward: each workgroup
// takes one row, the sum s of its dy (of dy * y), and writes dx = dy - exp(y) * s
// (dx = y * (dy - s)).

@group(0) @binding(1) var<storage, read> y: array<S_x>;
@group(0) @binding(2) var<storage, read> dy: array<S_x>;
@group(0) @binding(3) var<storage, read_write> dx: array<S_x>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = row_of(wid, nwg);
  // Uniform across the workgroup: every invocation returns, or none does.
  if (row >= p.rows) { return; }
  let c = p.width;
  let yb = p.offsets[0] + row * c;
  let gb = p.offsets[1] + row * c;
  var s = 0.0;
  for (var j = lid; j < c; j += 64u) {
    if (SOFTMAX) {
      s += f32(load_x(dy[gb + j])) * f32(load_x(y[yb + j]));
    } else {
      s += f32(load_x(dy[gb + j]));
    }
  }
  let total = sum_all(lid, s);
  for (var j = lid; j < c; j += 64u) {
    let g = f32(load_x(dy[gb + j]));
    let v = f32(load_x(y[yb + j]));
    if (SOFTMAX) {
      dx[row * c + j] = store_x(C_x(v * (g - total)));
    } else {
      dx[row * c + j] = store_x(C_x(g - exp(v) * total));
    }
  }
}
