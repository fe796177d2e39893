// The fused attention kernels' operands and results as packed bf16 (`packed.rs`), A_x = u32:
// element i in the low half of word i / 2 when i is even. The forward's probabilities are
// written as f32 words (P_ = f32, bf16-rounded) and packed after: a row of odd length starts
// mid-word, and a head's rows end where the next workgroup's begin.
const PACKED: bool = true;

fn word_(i: u32) -> u32 { return i >> 1u; }
fn val_(w: u32, i: u32) -> f32 { return widen_(w, i); }

fn one_(v: f32) -> u32 { return narrow_(v); }
fn two_(a: f32, b: f32) -> u32 { return narrow2_(a, b); }
fn prob_(v: f32) -> f32 { return store_b(v); }
