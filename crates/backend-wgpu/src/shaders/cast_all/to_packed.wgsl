// A unit of y: the packed bf16 word of two neighbouring elements (SPAN = 2; packed/words.wgsl),
// its high half zero where b is past the tensor's end (`both` false).
fn pair_(a: S_x, b: S_x, both: bool) -> A_y {
  return narrow2_(f32(load_x(a)), select(0.0, f32(load_x(b)), both));
}
