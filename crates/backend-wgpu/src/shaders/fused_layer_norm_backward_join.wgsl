// ops::LayerNormBackward, the parameters' gradients, second pass: a workgroup a column adds
// its S partial sums (its invocations a stride apart, then a tree) into dweight and dbias
// (each written only where the op has that parameter; otherwise its binding is a
// placeholder). A column's sums spread over a workgroup: one invocation walking all S of them
// would wait on each load in turn.

@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read_write> dweight: array<S_x>;
@group(0) @binding(3) var<storage, read_write> dbias: array<S_x>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let d = p.d;
  let col = row_of(wid, nwg);
  var acc = vec2<f32>(0.0);
  if (col < d) {
    for (var s = lid; s < p.segments; s += 64u) {
      let at_ = (s * d + col) * 2u;
      acc += vec2<f32>(partial[at_], partial[at_ + 1u]);
    }
  }
  let total = sum_all(lid, acc);
  if (col < d && lid == 0u) {
    if (flag(1u)) { dweight[col] = store_x(C_x(total.x)); }
    if (flag(2u)) { dbias[col] = store_x(C_x(total.y)); }
  }
}
