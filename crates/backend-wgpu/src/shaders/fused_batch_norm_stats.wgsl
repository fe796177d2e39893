// ops::BatchNormTrain, first pass: each workgroup summarizes its segment of one channel as
// (count, mean, sum of squared deviations) into partial[(c S + s) 3 ..]: each invocation joins
// its chunks' summaries, then the workgroup joins the invocations'.

@group(0) @binding(1) var<storage, read> x: array<A_x>;
@group(0) @binding(2) var<storage, read_write> partial: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = wid.x;
  let ch = wid.y;
  let seg = segment(s);
  let n = f32(CHUNK);
  let lanes = lanes_();
  var st = vec3<f32>(0.0);
  for (var j = seg.x + CHUNK * lid; j < seg.y; j += CHUNK * 256u) {
    let v = x_chunk_(offset(0u) + at(ch, j));
    let mean = dot(v, vec4<f32>(1.0)) / n;
    let d = (v - mean) * lanes;
    st = join(st, vec3<f32>(n, mean, dot(d, d)));
  }
  let total = join_all(lid, st);
  if (lid == 0u) {
    let at_ = (ch * p.segments + s) * 3u;
    partial[at_] = total.x;
    partial[at_ + 1u] = total.y;
    partial[at_ + 2u] = total.z;
  }
}
