// ops::BatchNormTrain, second pass: each workgroup joins its channel's S partial summaries into the
// batch mean and (biased) variance, normalizes its segment (y = (x - mean) invstd weight + bias,
// through a ReLU with flag 4), and the channel's first workgroup writes mean, invstd and the
// running statistics (the variance made unbiased for them, as PyTorch) and, with flag 8, the batch
// count plus one (an i64 as two words, low first). Without the affine parameters, running
// statistics or count their bindings are placeholders, never read or kept. The [C] operands are
// of type p: x's type, or f32 beside a half (autocast's batch norm).

@group(0) @binding(1) var<storage, read> x: array<A_x>;
@group(0) @binding(2) var<storage, read> weight: array<S_p>;
@group(0) @binding(3) var<storage, read> bias: array<S_p>;
@group(0) @binding(4) var<storage, read> running_mean: array<S_p>;
@group(0) @binding(5) var<storage, read> running_var: array<S_p>;
@group(0) @binding(6) var<storage, read> partial: array<f32>;
@group(0) @binding(7) var<storage, read_write> out_: array<A_x>;
@group(0) @binding(8) var<storage, read_write> mean_out: array<S_p>;
@group(0) @binding(9) var<storage, read_write> invstd_out: array<S_p>;
@group(0) @binding(10) var<storage, read_write> running_mean_out: array<S_p>;
@group(0) @binding(11) var<storage, read_write> running_var_out: array<S_p>;
@group(0) @binding(12) var<storage, read> batches: array<u32>;
@group(0) @binding(13) var<storage, read_write> batches_out: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x;
  let ch = wid.y;
  let segments = p.segments;
  var st = vec3<f32>(0.0);
  for (var k = lid; k < segments; k += 256u) {
    let at_ = (ch * segments + k) * 3u;
    st = join(st, vec3<f32>(partial[at_], partial[at_ + 1u], partial[at_ + 2u]));
  }
  let total = join_all(lid, st);
  let mean = total.y;
  let var_ = total.z / total.x;
  let invstd = 1.0 / sqrt(var_ + p.eps);
  var scale = invstd;
  var shift = 0.0;
  if (flag(1u)) {
    scale = invstd * f32(load_p(weight[offset(1u) + ch]));
    shift = f32(load_p(bias[offset(2u) + ch]));
  }
  if (s == 0u && lid == 0u) {
    mean_out[ch] = store_p(C_p(mean));
    invstd_out[ch] = store_p(C_p(invstd));
    if (flag(2u)) {
      let m = p.momentum;
      let at_stats = select(1u, 3u, flag(1u));
      let rm = f32(load_p(running_mean[offset(at_stats) + ch]));
      let rv = f32(load_p(running_var[offset(at_stats + 1u) + ch]));
      running_mean_out[ch] = store_p(C_p((1.0 - m) * rm + m * mean));
      running_var_out[ch] = store_p(C_p((1.0 - m) * rv + m * var_ * total.x / (total.x - 1.0)));
    }
    if (flag(8u) && ch == 0u) {
      let at_batches = 2u * offset(select(3u, 5u, flag(1u)));
      let low = batches[at_batches] + 1u;
      batches_out[0] = low;
      batches_out[1] = batches[at_batches + 1u] + select(0u, 1u, low == 0u);
    }
  }
  let seg = segment(s);
  for (var j = seg.x + CHUNK * lid; j < seg.y; j += CHUNK * 256u) {
    let i = at(ch, j);
    let y = (x_chunk_(offset(0u) + i) - mean) * scale + shift;
    write_chunk_(i, select(y, max(y, vec4<f32>(0.0)), flag(4u)));
  }
}
