// A unit of y: the packed bf16 word of two neighbouring elements (SPAN = 2; packed/words.wgsl).
fn pair_(a: S_x, b: S_x) -> A_y {
  return narrow2_(f32(load_x(a)), f32(load_x(b)));
}
