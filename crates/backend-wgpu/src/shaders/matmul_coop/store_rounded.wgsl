// f16 results need rounding, which a cooperative matrix of f32 sums cannot do in WGSL (no
// conversion between them): every sum goes through workgroup memory, and this is never called.
const STORE_DIRECT: bool = false;
fn store_frag(c: coop_mat16x16<f32, C>, at: u32) {}
// The operands are f16 as stored: nothing to scale (see scaled.wgsl).
fn scale_operands() {}
