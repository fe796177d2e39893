// Adam without amsgrad: the second moment is exp_avg_sq itself.

fn second_moment(e: u32, sq: f32) -> f32 {
  return sq;
}
