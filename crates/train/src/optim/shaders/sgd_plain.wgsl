// SGD without momentum: the step follows the gradient.

fn direction(e: u32, g: f32) -> f32 {
  return g;
}
