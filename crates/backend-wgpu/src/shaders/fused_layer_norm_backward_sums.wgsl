// ops::LayerNormBackward, the parameters' gradients, first pass: invocation j of workgroup
// (b, s) sums dy xhat and dy down column b 64 + j over segment s's rows (E rows, reading
// consecutive columns side by side, four rows' loads in flight) into partial[(s D + column) 2 ..].

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read> dy: array<S_x>;
@group(0) @binding(3) var<storage, read> mean: array<S_x>;
@group(0) @binding(4) var<storage, read> rstd: array<S_x>;
@group(0) @binding(5) var<storage, read_write> partial: array<f32>;

// Row r's terms (dy xhat, dy) of column col.
fn terms(r: u32, col: u32) -> vec2<f32> {
  let at_ = r * p.d + col;
  let e = f32(load_x(dy[offset(1u) + at_]));
  let xhat = (f32(load_x(x[offset(0u) + at_])) - f32(load_x(mean[offset(2u) + r]))) * f32(load_x(rstd[offset(3u) + r]));
  return vec2<f32>(e * xhat, e);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let d = p.d;
  let col = wid.x * 64u + lid;
  if (col >= d) { return; }
  let s = wid.y;
  let first = s * p.segment_rows;
  let end = min(first + p.segment_rows, p.rows);
  var acc = vec2<f32>(0.0);
  var r = first;
  for (; r + 3u < end; r += 4u) {
    let t0 = terms(r, col);
    let t1 = terms(r + 1u, col);
    let t2 = terms(r + 2u, col);
    let t3 = terms(r + 3u, col);
    acc += (t0 + t1) + (t2 + t3);
  }
  for (; r < end; r++) {
    acc += terms(r, col);
  }
  let at_ = (s * d + col) * 2u;
  partial[at_] = acc.x;
  partial[at_ + 1u] = acc.y;
}
