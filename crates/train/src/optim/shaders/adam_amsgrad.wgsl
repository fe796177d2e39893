// Adam with amsgrad: the running maximum of exp_avg_sq is the second moment, and is kept.

@group(0) @binding(8) var<storage, read> max_exp_avg_sq: array<S_x>;
@group(0) @binding(9) var<storage, read_write> max_exp_avg_sq_out: array<S_x>;

fn second_moment(e: u32, sq: f32) -> f32 {
  let m = max(load_x(max_exp_avg_sq[p.max_exp_avg_sq_at + e]), sq);
  max_exp_avg_sq_out[e] = store_x(m);
  return m;
}
