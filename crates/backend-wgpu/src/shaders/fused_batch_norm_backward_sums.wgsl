// ops::BatchNormBackward, first pass: each workgroup sums dy and dy xhat
// (xhat = (x - mean) invstd) over its segment of one channel into partial[(c S + s) 2 ..],
// dy zeroed where a ReLU after the forward cut (flag 4; weight and bias then give the
// forward's output, and are placeholders without the affine parameters).

@group(0) @binding(1) var<storage, read> x: array<A_x>;
@group(0) @binding(2) var<storage, read> dy: array<A_x>;
@group(0) @binding(3) var<storage, read> mean: array<S_p>;
@group(0) @binding(4) var<storage, read> invstd: array<S_p>;
@group(0) @binding(5) var<storage, read> weight: array<S_p>;
@group(0) @binding(6) var<storage, read> bias: array<S_p>;
@group(0) @binding(7) var<storage, read_write> partial: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x;
  let ch = wid.y;
  let mu = f32(load_p(mean[offset(2u) + ch]));
  let inv = f32(load_p(invstd[offset(3u) + ch]));
  let affine = affine_(ch, inv);
  let seg = segment(s);
  var acc = vec2<f32>(0.0);
  for (var j = seg.x + CHUNK * lid; j < seg.y; j += CHUNK * 256u) {
    let i = at(ch, j);
    // Lanes past the chunk: g is zero there.
    let v = x_chunk_(offset(0u) + i);
    let g = dy_chunk_(offset(1u) + i) * passed_(v, mu, affine.x, affine.y);
    acc += vec2<f32>(dot(g, vec4<f32>(1.0)), dot(g, (v - mu) * inv));
  }
  let total = sum_all(lid, acc);
  if (lid == 0u) {
    let at_ = (ch * p.segments + s) * 2u;
    partial[at_] = total.x;
    partial[at_ + 1u] = total.y;
  }
}
