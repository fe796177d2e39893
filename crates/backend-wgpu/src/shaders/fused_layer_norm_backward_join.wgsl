// ops::LayerNormBackward, the parameters' gradients, second pass: one invocation a column
// adds its S partial sums, in segment order, into dweight and dbias (each written only where
// the op has that parameter; otherwise its binding is a placeholder).

@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read_write> dweight: array<S_x>;
@group(0) @binding(3) var<storage, read_write> dbias: array<S_x>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let d = p.d;
  let col = wid.x * 64u + lid;
  if (col >= d) { return; }
  var acc = vec2<f32>(0.0);
  for (var s = 0u; s < p.segments; s++) {
    let at_ = (s * d + col) * 2u;
    acc += vec2<f32>(partial[at_], partial[at_ + 1u]);
  }
  if (flag(1u)) { dweight[col] = store_x(C_x(acc.x)); }
  if (flag(2u)) { dbias[col] = store_x(C_x(acc.y)); }
}
