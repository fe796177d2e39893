// The fused attention kernels' operands as their dtype stores them, an element a word (bf16 as
// f32 words). A_x: the operands' and results' word type; P_: the forward's probabilities'.
const PACKED: bool = false;

// The word holding element i, and element i's value from it.
fn word_(i: u32) -> u32 { return i; }
fn val_(w: A_x, i: u32) -> f32 { return f32(load_x(w)); }

// A result's element as stored (`one_`), or the word of two neighbouring elements (`two_`,
// used only where PACKED).
fn one_(v: f32) -> A_x { return store_x(C_x(v)); }
fn two_(a: f32, b: f32) -> A_x { return store_x(C_x(a)); }
fn prob_(v: f32) -> P_ { return store_x(C_x(v)); }
