// RMSprop, not centered: the second moment itself.

fn mean_square(e: u32, g: f32, sq: f32) -> f32 {
  return sq;
}
