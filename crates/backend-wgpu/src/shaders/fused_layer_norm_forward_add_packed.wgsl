// fused_layer_norm_forward_add.wgsl with a packed bf16 addend (packed/words.wgsl), widened
// exactly as it is read.

@group(0) @binding(ADD_BINDING) var<storage, read> addend: array<u32>;
@group(0) @binding(ADD_BINDING + 1u) var<storage, read_write> total: array<S_x>;

fn first(i: u32, k: u32) -> f32 {
  let e = offset(3u) + k;
  let v = f32(load_x(x[i])) + widen_(addend[e / 2u], e);
  total[k] = store_x(C_x(v));
  return v;
}

// The invocation that wrote the sum reads it back.
fn again(i: u32, k: u32) -> f32 {
  return f32(load_x(total[k]));
}
