// ops::BatchNormBackward, second pass: each workgroup sums its channel's S partial sums into
// dbias = sum(dy) and dweight = sum(dy xhat), writes
// dx = weight invstd (dy - dbias / M - xhat dweight / M) over its segment, and the channel's
// first workgroup writes dweight and dbias; with a ReLU after the forward (flag 4), dy is zeroed
// where it cut, as in the first pass. Without affine parameters, weight is 1 and the weight,
// bias, dweight and dbias bindings are placeholders. The [C] operands are of type p.

@group(0) @binding(1) var<storage, read> x: array<A_x>;
@group(0) @binding(2) var<storage, read> dy: array<A_x>;
@group(0) @binding(3) var<storage, read> mean: array<S_p>;
@group(0) @binding(4) var<storage, read> invstd: array<S_p>;
@group(0) @binding(5) var<storage, read> weight: array<S_p>;
@group(0) @binding(6) var<storage, read> bias: array<S_p>;
@group(0) @binding(7) var<storage, read> partial: array<f32>;
@group(0) @binding(8) var<storage, read_write> out_: array<A_x>;
@group(0) @binding(9) var<storage, read_write> dweight: array<S_p>;
@group(0) @binding(10) var<storage, read_write> dbias: array<S_p>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x;
  let ch = wid.y;
  let segments = p.segments;
  var acc = vec2<f32>(0.0);
  for (var k = lid; k < segments; k += 256u) {
    let at_ = (ch * segments + k) * 2u;
    acc += vec2<f32>(partial[at_], partial[at_ + 1u]);
  }
  let total = sum_all(lid, acc);
  let mu = f32(load_p(mean[offset(2u) + ch]));
  let inv = f32(load_p(invstd[offset(3u) + ch]));
  let affine = affine_(ch, inv);
  let scale = affine.x;
  if (s == 0u && lid == 0u && flag(1u)) {
    dweight[ch] = store_p(C_p(total.y));
    dbias[ch] = store_p(C_p(total.x));
  }
  let mean_dy = total.x / f32(count());
  let mean_dy_xhat = total.y / f32(count());
  let seg = segment(s);
  for (var j = seg.x + CHUNK * lid; j < seg.y; j += CHUNK * 256u) {
    let i = at(ch, j);
    let v = x_chunk_(offset(0u) + i);
    let g = dy_chunk_(offset(1u) + i) * passed_(v, mu, scale, affine.y);
    write_chunk_(i, scale * (g - mean_dy - (v - mu) * inv * mean_dy_xhat));
  }
}
