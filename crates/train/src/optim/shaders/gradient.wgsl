// The gradient as the fused optimizer updates read it (after optim.wgsl's helpers).

// Element `e`'s gradient as the composite takes it: negated when maximizing, plus weight decay
// `hyper_x(p.weight_decay) * param`. Reads the `grad` binding of the update's file.
fn gradient(e: u32, p0: f32) -> f32 {
  var g = load_x(grad[p.grad_at + e]);
  if (flag(MAXIMIZE)) { g = -g; }
  if (flag(DECAY)) { g = round_x(g + round_x(p0 * hyper_x(p.weight_decay))); }
  return g;
}
