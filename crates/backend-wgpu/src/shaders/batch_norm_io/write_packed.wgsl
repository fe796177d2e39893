// The second pass's output over segment `seg` of channel ch as packed bf16, two elements (one
// word) an invocation at a time: L and the segments' bounds are even (`fused_norm.rs`), so a
// pair j, j + 1 of one segment is a pair i, i + 1 of one word.
fn write_segment_(lid: u32, ch: u32, seg: vec2<u32>) {
  for (var j = seg.x + 2u * lid; j < seg.y; j += 512u) {
    let i = at(ch, j);
    out_[i >> 1u] = narrow2_(value_(i), value_(i + 1u));
  }
}
