// acc[base(e) + idx[e] * step] += src[e], walked over the index's shape (operand 0 the index,
// 1 the source, 2 the dense target with a zero stride on the indexed axis). Repeated indices
// make updates collide and WGSL has no float atomics, so each add is a compare-exchange loop
// over the f32 bits of `acc`. The order of the adds is unspecified, so sums may differ from the
// CPU's in the last bits.

const OPERANDS = 3u;

@group(0) @binding(1) var<storage, read> idx: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> src: array<S_x>;
@group(0) @binding(3) var<storage, read_write> acc: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let e = flat_id(wid, nwg, lid);
  if (e >= p.numel) { return; }
  let k = idx[offset_of(e, 0u)];
  if (!in_range(k)) {
    report(k);
    return;
  }
  let v = f32(load_x(src[offset_of(e, 1u)]));
  let at = offset_of(e, 2u) + k.x * extra(0u);
  var old = atomicLoad(&acc[at]);
  loop {
    let r = atomicCompareExchangeWeak(&acc[at], old, bitcast<u32>(bitcast<f32>(old) + v));
    if (r.exchanged) { break; }
    old = r.old_value;
  }
}
