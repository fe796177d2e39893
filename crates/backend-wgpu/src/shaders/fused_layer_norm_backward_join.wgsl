// ops::LayerNormBackward, the parameters' gradients, second pass: a workgroup a column adds
// its S partial sums (its invocations a stride apart, then a tree) into dweight and dbias
// (each written only where the op has that parameter; otherwise its binding is a
// placeholder). A column's sums spread over a workgroup, four loads in flight an invocation:
// one invocation walking all S of them would wait on each load in turn.

@group(0) @binding(1) var<storage, read> partial: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> dweight: array<S_x>;
@group(0) @binding(3) var<storage, read_write> dbias: array<S_x>;

fn run(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) {
  let d = p.d;
  let col = row_of(wid, nwg);
  var acc = vec2<f32>(0.0);
  if (col < d) {
    var s = lid;
    for (; s + 192u < p.segments; s += 256u) {
      let a0 = partial[s * d + col];
      let a1 = partial[(s + 64u) * d + col];
      let a2 = partial[(s + 128u) * d + col];
      let a3 = partial[(s + 192u) * d + col];
      acc += (a0 + a1) + (a2 + a3);
    }
    for (; s < p.segments; s += 64u) {
      acc += partial[s * d + col];
    }
  }
  let total = sum_all(lid, acc);
  if (col < d && lid == 0u) {
    if (flag(1u)) { dweight[col] = store_x(C_x(total.x)); }
    if (flag(2u)) { dbias[col] = store_x(C_x(total.y)); }
  }
}
