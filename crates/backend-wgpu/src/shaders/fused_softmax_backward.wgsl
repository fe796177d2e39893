// ops::SoftmaxLastDimBackward: each workgroup takes one row, the sum of dy * y, and writes
// dx = y * (dy - sum(dy * y)).

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
    s += f32(load_x(dy[gb + j])) * f32(load_x(y[yb + j]));
  }
  let dot = sum_all(lid, s);
  for (var j = lid; j < c; j += 64u) {
    let g = f32(load_x(dy[gb + j]));
    dx[row * c + j] = store_x(C_x(f32(load_x(y[yb + j])) * (g - dot)));
  }
}
