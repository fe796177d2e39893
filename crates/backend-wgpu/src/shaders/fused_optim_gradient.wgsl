// The gradient as the fused optimizer updates read it (after fused_optim.wgsl's helpers).

// Element `e`'s gradient as the composite takes it: negated when maximizing (flag 1), plus
// weight decay `hyper_x(wd) * param` (flag 2). Reads the `grad` binding of the update's file.
fn gradient(e: u32, p0: f32, wd: u32) -> f32 {
  var g = load_x(grad[params[3] + e]);
  if (flag(1u)) { g = -g; }
  if (flag(2u)) { g = round_x(g + round_x(p0 * hyper_x(wd))); }
  return g;
}
