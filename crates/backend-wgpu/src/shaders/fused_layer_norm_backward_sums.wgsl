// ops::LayerNormBackward, the parameters' gradients, first pass: invocation j of workgroup
// (b, s) sums dy xhat and dy down column b 64 + j over segment s's rows (E rows, reading
// consecutive columns side by side) into partial[(s D + column) 2 ..].

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read> dy: array<S_x>;
@group(0) @binding(3) var<storage, read> mean: array<S_x>;
@group(0) @binding(4) var<storage, read> rstd: array<S_x>;
@group(0) @binding(5) var<storage, read_write> partial: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let d = p.d;
  let col = wid.x * 64u + lid;
  if (col >= d) { return; }
  let s = wid.y;
  let first = s * p.segment_rows;
  let end = min(first + p.segment_rows, p.rows);
  var acc = vec2<f32>(0.0);
  for (var r = first; r < end; r++) {
    let e = f32(load_x(dy[offset(1u) + r * d + col]));
    let xhat = (f32(load_x(x[offset(0u) + r * d + col])) - f32(load_x(mean[offset(2u) + r]))) * f32(load_x(rstd[offset(3u) + r]));
    acc += vec2<f32>(e * xhat, e);
  }
  let at_ = (s * d + col) * 2u;
  partial[at_] = acc.x;
  partial[at_ + 1u] = acc.y;
}
