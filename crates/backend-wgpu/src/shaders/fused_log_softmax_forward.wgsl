// ops::LogSoftmaxLastDim, or with SOFTMAX ops::SoftmaxLastDim: each workgroup takes one row, its
// maximum m (NaN wins, as the composites' max), then s = sum(exp(x - m)), and writes
// y = x - (log(s) + m), or y = exp(x - m) / s. The log-softmax shifts by 0 where m is not
// finite, as its composite does.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = row_of(wid, nwg);
  // Uniform across the workgroup: every invocation returns, or none does.
  if (row >= p.rows) { return; }
  let c = p.width;
  let base = p.offsets[0] + row * c;
  // -inf, the identity of the maximum (an invocation past the row's end keeps it).
  var m = bitcast<f32>(0xff800000u);
  for (var j = lid; j < c; j += 64u) {
    let v = f32(load_x(x[base + j]));
    if (v > m || (!(v == v) && m == m)) { m = v; }
  }
  m = max_all(lid, m);
  // The largest finite f32: NaN and the infinities compare outside it.
  if (!SOFTMAX && !(abs(m) <= 3.4028234663852886e38)) { m = 0.0; }
  var s = 0.0;
  for (var j = lid; j < c; j += 64u) {
    s += exp(f32(load_x(x[base + j])) - m);
  }
  let total = sum_all(lid, s);
  let lse = log(total) + m;
  for (var j = lid; j < c; j += 64u) {
    let v = f32(load_x(x[base + j]));
    if (SOFTMAX) {
      y[row * c + j] = store_x(C_x(exp(v - m) / total));
    } else {
      y[row * c + j] = store_x(C_x(v - lse));
    }
  }
}
