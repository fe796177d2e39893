// Window geometry over [N, C, H, W], shared by the sliding-window and pooling kernels.
//
// `WindowParams` (`window.rs`): the invocations, the geometry, the input view's offset, and
// p.extra, three words whose meaning is the kernel's.
// Rows and columns are counted in the padded input (real row = padded row - ph), so that all
// the arithmetic stays in u32 without signed underflow.

struct Geo {
  h: u32, w: u32,
  kh: u32, kw: u32,
  sh: u32, sw: u32,
  ph: u32, pw: u32,
  dh: u32, dw: u32,
  oh: u32, ow: u32,
  offset: u32,
}

fn geo() -> Geo {
  return Geo(p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.out_h, p.out_w, p.offset);
}

// PyTorch's average-pooling window of output (y, x): real rows [h0, h1) and columns [w0, w1),
// and the divisor. The window is clipped first to the padded input, which is what
// count_include_pad counts, then to the real one.
struct AvgWindow { h0: u32, h1: u32, w0: u32, w1: u32, count: u32 }

fn avg_window(g: Geo, y: u32, x: u32, count_include_pad: bool) -> AvgWindow {
  let hs = y * g.sh;
  let he = min(hs + g.kh, g.h + 2u * g.ph);
  let ws = x * g.sw;
  let we = min(ws + g.kw, g.w + 2u * g.pw);
  let h0 = max(hs, g.ph);
  let h1 = max(min(he, g.h + g.ph), h0);
  let w0 = max(ws, g.pw);
  let w1 = max(min(we, g.w + g.pw), w0);
  let count = select((h1 - h0) * (w1 - w0), (he - hs) * (we - ws), count_include_pad);
  return AvgWindow(h0 - g.ph, h1 - g.ph, w0 - g.pw, w1 - g.pw, count);
}
