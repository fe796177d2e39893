// ops::CastAll: up to eight tensors k (x_k f32, y_k of type y) cast in one dispatch. y is stored
// in units of A_y, each SPAN elements: one element, or a packed bf16 word of two (pair_, from
// cast_all/; an odd tensor's last word has a zero high half, as every packed kernel writes it).
// Each workgroup writes 1,024 units of one tensor, four an invocation 256 apart; p.table holds,
// per tensor, its first workgroup and its count of elements (entries past the last tensor start
// at 0xffffffff, so the search stops before them), p.n the workgroups that work.
// Slots past the last tensor bind the first one's buffers again and are never run.

@group(0) @binding(1) var<storage, read> x0: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y0: array<A_y>;
@group(0) @binding(3) var<storage, read> x1: array<S_x>;
@group(0) @binding(4) var<storage, read_write> y1: array<A_y>;
@group(0) @binding(5) var<storage, read> x2: array<S_x>;
@group(0) @binding(6) var<storage, read_write> y2: array<A_y>;
@group(0) @binding(7) var<storage, read> x3: array<S_x>;
@group(0) @binding(8) var<storage, read_write> y3: array<A_y>;
@group(0) @binding(9) var<storage, read> x4: array<S_x>;
@group(0) @binding(10) var<storage, read_write> y4: array<A_y>;
@group(0) @binding(11) var<storage, read> x5: array<S_x>;
@group(0) @binding(12) var<storage, read_write> y5: array<A_y>;
@group(0) @binding(13) var<storage, read> x6: array<S_x>;
@group(0) @binding(14) var<storage, read_write> y6: array<A_y>;
@group(0) @binding(15) var<storage, read> x7: array<S_x>;
@group(0) @binding(16) var<storage, read_write> y7: array<A_y>;

// Unit u of y from elements SPAN u and SPAN u + SPAN - 1 of x, the second only where it is
// below n (else b repeats a, and `both` is false).
fn cast_at(k: u32, u: u32, n: u32) {
  let b = min(SPAN * u + SPAN - 1u, n - 1u);
  let both = SPAN * u + SPAN - 1u < n;
  switch k {
    case 0u: { y0[u] = pair_(x0[SPAN * u], x0[b], both); }
    case 1u: { y1[u] = pair_(x1[SPAN * u], x1[b], both); }
    case 2u: { y2[u] = pair_(x2[SPAN * u], x2[b], both); }
    case 3u: { y3[u] = pair_(x3[SPAN * u], x3[b], both); }
    case 4u: { y4[u] = pair_(x4[SPAN * u], x4[b], both); }
    case 5u: { y5[u] = pair_(x5[SPAN * u], x5[b], both); }
    case 6u: { y6[u] = pair_(x6[SPAN * u], x6[b], both); }
    default: { y7[u] = pair_(x7[SPAN * u], x7[b], both); }
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
  let units = (n + SPAN - 1u) / SPAN;
  for (var r = 0u; r < 4u; r++) {
    let e = first + 256u * r;
    if (e >= units) { return; }
    cast_at(k, e, n);
  }
}
