// ops::NllLoss: one workgroup of 64 sums -logp[i, t_i] over the rows, in f32, and divides the
// sum by the row count where p.mean is 1. A target outside 0..C adds nothing and is reported
// as the index kernels report one (index_fault.wgsl): fault[0] = 1, fault[1..3] its low and
// high words, fault[3] = C, fault[4] = p.tag.

@group(0) @binding(1) var<storage, read> logp: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> fault: array<atomic<u32>>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  for (var i = lid; i < p.rows; i += 64u) {
    let t = targets[p.offsets[1] + i];
    if (t.y == 0u && t.x < p.classes) {
      s -= logp[p.offsets[0] + i * p.classes + t.x];
    } else if (atomicExchange(&fault[0], 1u) == 0u) {
      atomicStore(&fault[1], t.x);
      atomicStore(&fault[2], t.y);
      atomicStore(&fault[3], p.classes);
      atomicStore(&fault[4], p.tag);
    }
  }
  let total = sum_all(lid, s);
  if (lid == 0u) {
    var loss = total;
    if (p.mean != 0u) { loss = total / f32(p.rows); }
    out[0] = loss;
  }
}
