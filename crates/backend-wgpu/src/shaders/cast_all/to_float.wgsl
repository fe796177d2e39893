// A unit of y: one element (SPAN = 1; b is a itself).
fn pair_(a: S_x, b: S_x, both: bool) -> A_y {
  return store_y(C_y(load_x(a)));
}
