// Shared by the fused batch-norm kernels: x is [N, C, L], M = N L values per channel, each channel
// cut into S segments of E values (the last maybe shorter); workgroup (s, c) serves segment s of
// channel c. `BatchNormParams` (`fused_norm.rs`): p.n, p.c, p.l, p.segments = S, p.segment_len = E,
// p.flags (1 affine, 2 running statistics, 4 a ReLU after, 8 a batch count), p.eps, p.momentum,
// and the inputs' offsets. x, dy and the output are A_x: S_x as stored, vec4s of it, or packed
// bf16 words; the kernels read and write CHUNK neighbouring values at a time (1, 4 or 2; E and L
// are multiples of it) through x_chunk_, dy_chunk_ and write_chunk_ (batch_norm_io/), in the
// lanes of a vec4<f32>, zeros after the chunk's.

fn flag(bit: u32) -> bool {
  return (p.flags & bit) != 0u;
}

fn offset(k: u32) -> u32 {
  return p.offsets[k];
}

// Values per channel.
fn count() -> u32 {
  return p.n * p.l;
}

// Where value j (0..M) of channel ch sits in a contiguous [N, C, L] buffer.
fn at(ch: u32, j: u32) -> u32 {
  let l = p.l;
  return ((j / l) * p.c + ch) * l + j % l;
}

// 1 in the lanes a chunk fills, 0 after.
fn lanes_() -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(CHUNK));
}

// With a ReLU after the batch norm (flag 4): 1 in the lanes where the forward's output
// (x - mean) scale + shift, computed as the forward computes it, is positive, else 0; without
// one, 1 everywhere.
fn passed_(x: vec4<f32>, mean: f32, scale: f32, shift: f32) -> vec4<f32> {
  if (!flag(4u)) { return vec4<f32>(1.0); }
  return select(vec4<f32>(0.0), vec4<f32>(1.0), (x - mean) * scale + shift > vec4<f32>(0.0));
}

// The values segment s of a channel covers: [first, end).
fn segment(s: u32) -> vec2<u32> {
  let first = s * p.segment_len;
  return vec2<u32>(first, min(first + p.segment_len, count()));
}

var<workgroup> tree: array<vec3<f32>, 256>;

// Two (count, mean, sum of squared deviations) summaries joined (Chan et al.), so that no
// variance is taken as a difference of large sums.
fn join(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {
  let n = a.x + b.x;
  if (b.x == 0.0) { return a; }
  if (a.x == 0.0) { return b; }
  let d = b.y - a.y;
  let f = b.x / n;
  return vec3<f32>(n, a.y + d * f, a.z + b.z + d * d * a.x * f);
}

// The workgroup's summaries joined; every invocation gets the result.
fn join_all(lid: u32, v: vec3<f32>) -> vec3<f32> {
  tree[lid] = v;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (lid < k) { tree[lid] = join(tree[lid], tree[lid + k]); }
    workgroupBarrier();
  }
  let r = tree[0];
  workgroupBarrier();
  return r;
}

// The workgroup's values summed; every invocation gets the result.
fn sum_all(lid: u32, v: vec2<f32>) -> vec2<f32> {
  tree[lid] = vec3<f32>(v, 0.0);
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (lid < k) { tree[lid] = tree[lid] + tree[lid + k]; }
    workgroupBarrier();
  }
  let r = tree[0].xy;
  workgroupBarrier();
  return r;
}
