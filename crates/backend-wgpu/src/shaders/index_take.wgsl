// out[e] = src[base(e) + idx[e] * step]: gather, and index_select (its 1-D index broadcast over
// the output's shape). Operand 0 is the index walked over the output's shape, operand 1 the
// source walked likewise with a zero stride on the indexed axis. Pure data movement, so it
// serves every dtype.

const OPERANDS = 2u;

@group(0) @binding(1) var<storage, read> idx: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> src: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let k = idx[offset_of(e, 0u)];
  if (!in_range(k)) {
    report(k);
    out[e] = S_x();
    return;
  }
  out[e] = src[offset_of(e, 1u) + k.x * extra(0u)];
}
