// ops::CastAll: up to eight tensors k (x_k f32, y_k of type y, one element count each) cast in
// one dispatch. Each workgroup casts 1,024 elements of one tensor, four an invocation 256 apart;
// p.table holds, per tensor, its first workgroup and its element count (entries past the last
// tensor start at 0xffffffff, so the search stops before them), p.n the workgroups that work.
// Slots past the last tensor bind the first one's buffers again and are never run.

@group(0) @binding(1) var<storage, read> x0: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y0: array<S_y>;
@group(0) @binding(3) var<storage, read> x1: array<S_x>;
@group(0) @binding(4) var<storage, read_write> y1: array<S_y>;
@group(0) @binding(5) var<storage, read> x2: array<S_x>;
@group(0) @binding(6) var<storage, read_write> y2: array<S_y>;
@group(0) @binding(7) var<storage, read> x3: array<S_x>;
@group(0) @binding(8) var<storage, read_write> y3: array<S_y>;
@group(0) @binding(9) var<storage, read> x4: array<S_x>;
@group(0) @binding(10) var<storage, read_write> y4: array<S_y>;
@group(0) @binding(11) var<storage, read> x5: array<S_x>;
@group(0) @binding(12) var<storage, read_write> y5: array<S_y>;
@group(0) @binding(13) var<storage, read> x6: array<S_x>;
@group(0) @binding(14) var<storage, read_write> y6: array<S_y>;
@group(0) @binding(15) var<storage, read> x7: array<S_x>;
@group(0) @binding(16) var<storage, read_write> y7: array<S_y>;

fn to_y(v: S_x) -> S_y {
  return store_y(C_y(load_x(v)));
}

fn cast_at(k: u32, e: u32) {
  switch k {
    case 0u: { y0[e] = to_y(x0[e]); }
    case 1u: { y1[e] = to_y(x1[e]); }
    case 2u: { y2[e] = to_y(x2[e]); }
    case 3u: { y3[e] = to_y(x3[e]); }
    case 4u: { y4[e] = to_y(x4[e]); }
    case 5u: { y5[e] = to_y(x5[e]); }
    case 6u: { y6[e] = to_y(x6[e]); }
    default: { y7[e] = to_y(x7[e]); }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let group = wid.y * nwg.x + wid.x;
  if (group >= p.n) { return; }
  var k = 0u;
  while (k + 1u < 8u && p.table[2u * (k + 1u)] <= group) {
    k++;
  }
  let first = (group - p.table[2u * k]) * 1024u + lid;
  let n = p.table[2u * k + 1u];
  for (var r = 0u; r < 4u; r++) {
    let e = first + 256u * r;
    if (e >= n) { return; }
    cast_at(k, e);
  }
}
