// ops::LayerNormLow's copy: each y (f32) cast to the low type `t`.

@group(0) @binding(7) var<storage, read_write> low: array<S_t>;

fn keep(i: u32, v: f32) {
  low[i] = store_t(C_t(v));
}
