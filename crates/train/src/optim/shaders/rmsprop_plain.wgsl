// RMSprop without momentum: the step follows the scaled gradient.

fn direction(e: u32, scaled: f32) -> f32 {
  return scaled;
}
