// ops::AddLayerNorm (f32 x): the rows normalized are x + addend (the addend f32 or f16, widened
// first: one rounding, as the add computes it), and the kernel writes that sum as it reads it.
// The bindings follow y's low copy where there is one (ADD_BINDING).

@group(0) @binding(ADD_BINDING) var<storage, read> addend: array<S_b>;
@group(0) @binding(ADD_BINDING + 1u) var<storage, read_write> total: array<S_x>;

fn first(i: u32, k: u32) -> f32 {
  let v = f32(load_x(x[i])) + f32(load_b(addend[offset(3u) + k]));
  total[k] = store_x(C_x(v));
  return v;
}

// The invocation that wrote the sum reads it back.
fn again(i: u32, k: u32) -> f32 {
  return f32(load_x(total[k]));
}
