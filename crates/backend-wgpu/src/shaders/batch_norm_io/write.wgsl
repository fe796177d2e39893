// The second pass's output over segment `seg` of channel ch, an element an invocation at a
// time: out_[i] = value_(i), rounded to the dtype.
fn write_segment_(lid: u32, ch: u32, seg: vec2<u32>) {
  for (var j = seg.x + lid; j < seg.y; j += 256u) {
    let i = at(ch, j);
    out_[i] = store_x(C_x(value_(i)));
  }
}
