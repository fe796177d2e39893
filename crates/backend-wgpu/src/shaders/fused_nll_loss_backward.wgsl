// ops::NllLossBackward: dx[i, j] = -g (-(g / N) where p.mean is 1) where j is row i's target,
// else 0, an invocation an element. The forward has reported any target out of range.

@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.rows * p.classes) { return; }
  let i = e / p.classes;
  let t = targets[p.offsets[1] + i];
  var v = g[p.offsets[0]];
  if (p.mean != 0u) { v = v / f32(p.rows); }
  dx[e] = select(0.0, -v, t.y == 0u && t.x == e % p.classes);
}
